import { screen, within } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mockApi } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import FleetPage from './FleetPage';

const noFrr = { available: false, reason: 'bgpd: /var/run/frr/bgpd.vty does not exist', vty_dir: '/var/run/frr', neighbors: [], problems: [] };

const session = (address: string, hostname: string, state = 'Established', bfd = 'up') => ({
  address,
  hostname,
  remote_as: 65001,
  local_as: 65100,
  state,
  admin_shutdown: state === 'Idle',
  uptime_s: state === 'Established' ? 125 : null,
  prefixes_received: 1,
  prefixes_sent: 3,
  last_reset: null,
  last_reset_age_s: null,
  bfd_configured: true,
  bfd: {
    peer: address,
    local: null,
    interface: 'sat0',
    status: bfd,
    status_age_s: 120,
    diagnostic: 'ok',
    remote_diagnostic: 'ok',
    receive_interval_ms: 200,
    transmit_interval_ms: 200,
    detect_multiplier: 4,
  },
});

const routing = (neighbors: ReturnType<typeof session>[], problems: string[] = []) => ({
  available: true,
  reason: null,
  vty_dir: '/run/frr',
  neighbors,
  problems,
});

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
  routing: noFrr,
  routing_error: null,
  ...over,
});

/** Renders the Fleet page over these members and returns the table's body rows. */
async function renderFleet(gateways: unknown[]) {
  mockApi({ 'GET /api/v1/fleet': () => jsonResponse({ active_version_id: 7, active_revision: 'v7', gateways }) });
  renderWithProviders(<FleetPage />);
  const table = await screen.findByRole('table', { name: 'Fleet gateways' });
  return within(table).getAllByRole('row').slice(1);
}

describe('FleetPage', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('lists every gateway with health, revision, flows and throughput, and flags one off the active version', async () => {
    const rows = await renderFleet([
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
    ]);
    expect(rows.map((r) => r.getAttribute('data-gateway'))).toEqual(['local', 'gw2', 'gw3']);
    expect(rows[0]).toHaveTextContent('v7');
    expect(rows[0]).toHaveTextContent('12');
    expect(rows[1]).toHaveTextContent('v6');
    expect(rows[2]).toHaveTextContent('unreachable');
    expect(rows[2]).toHaveTextContent('connection refused');
    expect(screen.getByRole('alert')).toHaveTextContent('gw2 runs another revision than v7');
  });

  it("shows each gateway's BGP sessions with BFD, and flags one whose sessions are not all up", async () => {
    const rows = await renderFleet([
      member({ routing: routing([session('10.71.11.1', 'hub'), session('10.71.21.1', 'edge')]) }),
      member({
        gateway: 'gw2',
        routing: routing(
          [session('10.71.12.1', 'hub', 'Idle'), session('10.71.22.1', 'edge', 'Active', 'down')],
          ['BGP session to 10.71.12.1 (hub) is Idle (admin shutdown)', 'BFD session to 10.71.22.1 (edge) is down'],
        ),
      }),
      member({ gateway: 'gw3' }),
      member({ gateway: 'gw4', routing: null, routing_error: { code: 'not_found', message: 'no such endpoint' } }),
    ]);
    const peer = (row: HTMLElement, address: string) => row.querySelector(`[data-peer="${address}"]`) as HTMLElement;
    // All up: both sessions Established with uptime and prefixes, BFD up, the gateway healthy.
    expect(peer(rows[0], '10.71.11.1')).toHaveTextContent('hub 10.71.11.1EstablishedBFD up2m 5s · prefixes 1 in / 3 out');
    expect(peer(rows[0], '10.71.21.1')).toHaveTextContent('BFD up');
    expect(within(rows[0]).getByText('ok')).toBeInTheDocument();
    // Sessions down: each one's state, the gateway degraded, its problems listed and named in the alert.
    expect(peer(rows[1], '10.71.12.1')).toHaveTextContent('Idle (admin)');
    expect(peer(rows[1], '10.71.22.1')).toHaveTextContent('Active');
    expect(peer(rows[1], '10.71.22.1')).toHaveTextContent('BFD down');
    expect(within(rows[1]).getByText('degraded')).toBeInTheDocument();
    expect(rows[1]).toHaveTextContent('BGP session to 10.71.12.1 (hub) is Idle (admin shutdown); BFD session to 10.71.22.1 (edge) is down');
    // No FRR beside it: said so, not a problem.
    expect(rows[2]).toHaveTextContent('no FRR');
    expect(within(rows[2]).getByText('ok')).toBeInTheDocument();
    // A daemon that does not serve the route: a problem of its own.
    expect(rows[3]).toHaveTextContent('routing state not readable: no such endpoint');
    const alert = screen.getByRole('alert');
    expect(alert).toHaveTextContent('Routing sessions not all up');
    expect(alert).toHaveTextContent('gw2, gw4: see the problems below');
  });
});
