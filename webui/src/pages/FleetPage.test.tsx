import { screen, within } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mockApi } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import FleetPage from './FleetPage';

const member = (over: Record<string, unknown>) => ({
  gateway: 'local',
  address: 'unix:/run/perigee/control.sock',
  reachable: true,
  status: 'ok',
  revision: 'v7',
  version: '0.1.0',
  uptime_s: 3600,
  flows_live: 12,
  throughput_down_bps: 40_000_000,
  throughput_up_bps: 2_000_000,
  problems: [],
  error: null,
  ...over,
});

describe('FleetPage', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('lists every gateway with health, revision, flows and throughput, and flags one off the active version', async () => {
    mockApi({
      'GET /api/v1/fleet': () =>
        jsonResponse({
          active_version_id: 7,
          active_revision: 'v7',
          gateways: [
            member({}),
            member({ gateway: 'gw2', address: '10.79.12.2:7443', revision: 'v6', flows_live: 3, throughput_down_bps: 1_000_000 }),
            member({
              gateway: 'gw3',
              address: '10.79.13.2:7443',
              reachable: false,
              status: 'unreachable',
              revision: null,
              uptime_s: null,
              flows_live: null,
              throughput_down_bps: null,
              throughput_up_bps: null,
              error: { code: 'gateway_unreachable', message: 'gateway 10.79.13.2:7443: connection refused' },
            }),
          ],
        }),
    });
    renderWithProviders(<FleetPage />);
    const table = await screen.findByRole('table', { name: 'Fleet gateways' });
    const rows = within(table).getAllByRole('row').slice(1);
    expect(rows.map((r) => r.getAttribute('data-gateway'))).toEqual(['local', 'gw2', 'gw3']);
    expect(rows[0]).toHaveTextContent('v7');
    expect(rows[0]).toHaveTextContent('12');
    expect(rows[1]).toHaveTextContent('v6');
    expect(rows[2]).toHaveTextContent('unreachable');
    expect(rows[2]).toHaveTextContent('connection refused');
    expect(screen.getByRole('alert')).toHaveTextContent('gw2 runs another revision than v7');
  });
});
