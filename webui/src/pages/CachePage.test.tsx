import { screen } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mockApi } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import CachePage from './CachePage';

function cacheApi(role: 'hub' | 'terminal') {
  return mockApi({
    'GET /api/v1/cache/stats': () => jsonResponse({ enabled: true, running: true, hits: 6, misses: 4, requests: 10, bytes_saved_satellite: 3_000_000 }),
    'GET /api/v1/health': () =>
      jsonResponse({ status: 'ok', api: {}, gateway_reachable: true, problems: [], gateway: { status: 'ok', role, problems: [], workers: [] } }),
  });
}

describe('CachePage savings', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('at a hub a hit saves backhaul, not the satellite', async () => {
    cacheApi('hub');
    renderWithProviders(<CachePage />);
    expect((await screen.findAllByText('Backhaul saved')).length).toBeGreaterThan(0);
    expect(screen.queryByText(/Satellite capacity saved/)).toBeNull();
    expect(screen.getByText(/still cross the satellite to the client/)).toBeInTheDocument();
  });

  it('at a terminal a hit saves satellite capacity', async () => {
    cacheApi('terminal');
    renderWithProviders(<CachePage />);
    expect((await screen.findAllByText('Satellite capacity saved')).length).toBeGreaterThan(0);
    expect(screen.queryByText('Backhaul saved')).toBeNull();
  });
});
