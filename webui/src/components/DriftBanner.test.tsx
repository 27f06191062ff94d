import { screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { RunningOut } from '../api/endpoints';
import { mockApi } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import { DriftBanner } from './DriftBanner';

function running(over: Partial<RunningOut>): RunningOut {
  return {
    reachable: true,
    revision: 'site-7',
    config: null,
    version_id: 2,
    desired_version_id: 3,
    in_sync: false,
    changes: [{ path: '$.splitter.max_flows', op: 'changed', old: 2500, new: 4000 }],
    checked_at: 1_700_000_000,
    error: null,
    needs_setup: false,
    ...over,
  };
}

describe('DriftBanner', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('says what runs, what applying the desired version changes, and applies it', async () => {
    let applied = false;
    const calls = mockApi({
      'GET /api/v1/config/running': () => jsonResponse(applied ? running({ version_id: 3, in_sync: true, changes: [] }) : running({})),
      'POST /api/v1/versions/3/apply': () => {
        applied = true;
        return jsonResponse({ ok: true, version_id: 3, active_version_id: 3, revision: 'v3', error: null });
      },
    });
    renderWithProviders(<DriftBanner />);
    const banner = await screen.findByRole('status');
    expect(banner).toHaveTextContent('Version 3 is not applied');
    expect(banner).toHaveTextContent('The gateway runs version 2 (revision site-7).');
    expect(screen.getByRole('list', { name: 'Changes the desired version makes' })).toHaveTextContent('splitter.max_flows: 2500 → 4000');
    await userEvent.setup().click(screen.getByRole('button', { name: 'Apply version 3' }));
    await waitFor(() => expect(screen.queryByRole('status')).not.toBeInTheDocument());
    expect(calls.some((c) => c.method === 'POST' && c.path === '/api/v1/versions/3/apply')).toBe(true);
  });

  it('never presents the desired version as running when the gateway runs nothing', async () => {
    mockApi({ 'GET /api/v1/config/running': () => jsonResponse(running({ revision: null, version_id: null, desired_version_id: 1 })) });
    renderWithProviders(<DriftBanner />);
    expect(await screen.findByRole('status')).toHaveTextContent('The gateway runs no config yet');
  });

  it('is silent while the gateway runs the desired version', async () => {
    const calls = mockApi({ 'GET /api/v1/config/running': () => jsonResponse(running({ in_sync: true, version_id: 3, changes: [] })) });
    renderWithProviders(<DriftBanner />);
    await waitFor(() => expect(calls.length).toBeGreaterThan(0));
    expect(screen.queryByRole('status')).not.toBeInTheDocument();
  });
});
