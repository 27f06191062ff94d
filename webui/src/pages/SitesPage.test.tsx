import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mockApi } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import SitesPage from './SitesPage';

const SITES = {
  updated_at: 1_700_000_000,
  sites: [
    { site: 'ship-a', prefixes: ['10.20.0.0/16'], down_bps: 12_500_000, up_bps: 800_000, flows: 14, rtt_ms: 612.4, retrans_ps: 2.5, cache_saved_bps: 3_000_000 },
    { site: 'other', prefixes: [], down_bps: 0, up_bps: 0, flows: 0, rtt_ms: null, retrans_ps: 0, cache_saved_bps: 0 },
  ],
};

/** How far back each top-talkers request reached, in seconds. */
const spans: number[] = [];

function talkers(req: Request) {
  const q = new URL(req.url).searchParams;
  spans.push(Date.now() / 1000 - Number(q.get('start')));
  const by = q.get('by');
  const rows =
    by === 'site'
      ? [{ key: 'ship-a', site: 'ship-a', bytes_down: 5 * 1024 * 1024, bytes_up: 2048, flows: 40 }]
      : [{ key: '10.20.0.7', site: 'ship-a', bytes_down: 3 * 1024 * 1024, bytes_up: 1024, flows: 9 }];
  return jsonResponse({ by, start: Number(q.get('start')), end: Number(q.get('start')) + 1, talkers: rows });
}

function sitesApi() {
  return mockApi({
    'GET /api/v1/sites': () => jsonResponse(SITES),
    'GET /api/v1/stats/top-talkers': (req) => talkers(req),
    'GET /api/v1/stats/series': () => jsonResponse({ metric: 'site_down_bps', resolution_s: 1, step_s: 1, start: 0, end: 1, series: [] }),
  });
}

describe('SitesPage', () => {
  afterEach(() => vi.unstubAllGlobals());

  it("shows each site's last second and links it to its closed flows", async () => {
    sitesApi();
    renderWithProviders(<SitesPage />);
    const table = await screen.findByRole('table', { name: 'Sites now' });
    const ship = within(table).getByRole('row', { name: /ship-a/ });
    expect(ship).toHaveTextContent('10.20.0.0/16');
    expect(ship).toHaveTextContent('612 ms');
    expect(ship).toHaveTextContent('2.5 /s');
    expect(within(ship).getByRole('link', { name: 'ship-a' })).toHaveAttribute('href', '/flows?tab=closed&site=ship-a');
    // No RTT without live flows: unknown, not 0.
    expect(within(table).getByRole('row', { name: /other/ })).toHaveTextContent('no site');
    expect(within(table).getByRole('row', { name: /other/ })).toHaveTextContent('—');
  });

  it('asks for the top talkers over the chosen range', async () => {
    const calls = sitesApi();
    const user = userEvent.setup();
    renderWithProviders(<SitesPage />);
    const bySite = await screen.findByRole('table', { name: 'Top sites, last 15 min' });
    expect(bySite).toHaveTextContent('5.0 MiB');
    expect(await screen.findByRole('table', { name: 'Top client addresses, last 15 min' })).toHaveTextContent('10.20.0.7');
    expect(Math.max(...spans)).toBeLessThan(15 * 60 + 5);
    await user.click(screen.getByRole('radio', { name: '24 h' }));
    expect(await screen.findByRole('table', { name: 'Top sites, last 24 h' })).toBeInTheDocument();
    await waitFor(() => expect(Math.max(...spans)).toBeGreaterThan(86_400 - 5));
    expect(calls.some((c) => c.path === '/api/v1/stats/top-talkers')).toBe(true);
  });
});
