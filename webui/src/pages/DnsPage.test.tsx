import { screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mockApi } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import DnsPage from './DnsPage';

const STATS = {
  enabled: true,
  running: true,
  unbound_version: '1.17.1',
  upstreams: ['10.71.3.53'],
  queries: 400,
  cache_hits: 300,
  cache_misses: 100,
  hit_ratio: 0.75,
  stale_answers: 12,
  prefetches: 30,
  upstream_resolutions: 100,
  servfail_answers: 0,
  ratelimited_queries: 0,
  mean_upstream_ms: 620,
  satellite_time_saved_s: 186,
  cache_memory_used_bytes: 2_097_152,
  cache_memory_capacity_bytes: 67_108_864,
  upstream_transport: 'peer_path',
  dnssec_validation: true,
  dnssec_secure_answers: 40,
  dnssec_bogus_answers: 2,
  problems: [],
  intercept: true,
  intercepted_resolvers: ['10.71.3.53', '192.0.2.1'],
  serving: true,
  intercepted_packets: 410,
  upstream_healthy: false,
  upstream_probe: [{ upstream: '10.71.3.53@53', ok: false, rtt_ms: null, error: '10.71.3.53:53: no answer within 3000 ms' }],
};

const RUNNING = { role: 'terminal', dns: { enabled: true, upstream: ['10.71.3.53'], rebind_protection: true, private_domains: ['corp.example'] } };

function dnsApi(stats: Record<string, unknown> = STATS) {
  return mockApi({
    'GET /api/v1/dns/stats': () => jsonResponse(stats),
    'GET /api/v1/config': () => jsonResponse({ version_id: 1, config: RUNNING }),
    'GET /api/v1/config/running': () => jsonResponse({ config: RUNNING }),
    'GET /api/v1/stats/series': () => jsonResponse({ metric: 'dns_hit_ratio', resolution_s: 1, step_s: 1, start: 0, end: 1, series: [] }),
    'POST /api/v1/dns/flush': () => jsonResponse({ ok: true }),
  });
}

describe('DnsPage', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('shows the hit ratio, the satellite time saved and an unreachable upstream', async () => {
    dnsApi();
    renderWithProviders(<DnsPage />);
    expect(await screen.findByText('75.0 %')).toBeInTheDocument();
    expect(screen.getByText('3 min 06 s')).toBeInTheDocument();
    expect(screen.getByText('620 ms')).toBeInTheDocument();
    expect(screen.getByRole('alert')).toHaveTextContent('No upstream resolver answers');
    expect(screen.getByRole('table', { name: 'Upstream probe' })).toHaveTextContent('no answer within 3000 ms');
    expect(screen.getByText(/DNS over HTTPS/)).toBeInTheDocument();
  });

  it('says whose queries are answered, how the upstream is reached and what is refused', async () => {
    dnsApi();
    renderWithProviders(<DnsPage />);
    const table = await screen.findByRole('table', { name: 'Resolver protection' });
    expect(table).toHaveTextContent("the gateway and 10.71.3.53, 192.0.2.1; queries to other resolvers (a customer's own) pass untouched");
    expect(table).toHaveTextContent('inside the peer path (encrypted)');
    expect(table).toHaveTextContent('on, except corp.example');
    expect(table).toHaveTextContent('validated: 40 secure, 2 refused as forged');
    expect(screen.queryByText('Upstream queries cross the satellite in clear')).not.toBeInTheDocument();
  });

  it('warns at a terminal whose upstream queries cross in clear', async () => {
    dnsApi({ ...STATS, upstream_transport: 'direct', upstream_healthy: true });
    renderWithProviders(<DnsPage />);
    expect(await screen.findByText('Upstream queries cross the satellite in clear')).toBeInTheDocument();
    expect(screen.getByRole('table', { name: 'Resolver protection' })).toHaveTextContent('straight to the upstream, in clear');
  });

  it('flushes one name, and refuses what is not a name before asking the API', async () => {
    const calls = dnsApi();
    const user = userEvent.setup();
    renderWithProviders(<DnsPage />);
    const input = await screen.findByLabelText('Name');
    await user.type(input, 'bad name');
    await user.click(screen.getByRole('button', { name: 'Flush name' }));
    expect(await screen.findByText('A domain name, e.g. www.example.com')).toBeInTheDocument();
    expect(calls.filter((c) => c.method === 'POST')).toHaveLength(0);
    await user.clear(input);
    await user.type(input, 'cdn.example.com');
    await user.click(screen.getByRole('button', { name: 'Flush name' }));
    await waitFor(() => expect(calls.filter((c) => c.method === 'POST').map((c) => c.body)).toEqual([{ all: false, name: 'cdn.example.com' }]));
    expect(await screen.findByText('Flushed.')).toBeInTheDocument();
  });
});
