import { describe, expect, it } from 'vitest';
import type { GatewayHealth, HealthOut } from '../api/endpoints';
import { alertsFrom } from './health';

const okGateway: GatewayHealth = {
  status: 'ok',
  version: '0.1.0',
  uptime_s: 60,
  role: 'hub',
  config_revision: 'v1',
  fail_open: false,
  hybla: {
    implementation: 'bpf', loaded: true, rtt0_ms: 25, base_rtt_ms: 0, cwnd_max: 0, available: ['hybla', 'cubic'], problem: null,
    owned: true, pin_dir: '/sys/fs/bpf/perigee', netns_cookie: null, netns: [],
    ld: { loaded: true, registration: 'current', version: 1, problem: null },
  },
  problems: [],
  peer: null,
  workers: [],
  host: {
    cpus: 2, cpu_busy_seconds: 0, cpu_idle_seconds: 0, load_1m: 0, load_5m: 0, load_15m: 0,
    memory_total_bytes: 0, memory_available_bytes: 0, disks: [], interfaces: [],
  },
  services: { squid: { enabled: false, serving: false, problem: null }, resolver: { enabled: false, serving: false, problem: null } },
};

function health(over: Partial<HealthOut>): HealthOut {
  return { status: 'ok', api: {}, gateway_reachable: true, gateway: okGateway, problems: [], ...over };
}

describe('alertsFrom', () => {
  it('is quiet when everything is fine', () => {
    expect(alertsFrom(health({}), { enabled: true, disk_used_bytes: 10, disk_capacity_bytes: 100 })).toEqual([]);
  });

  it('reports the daemon down', () => {
    const a = alertsFrom(health({ gateway_reachable: false, gateway: null, problems: ['gateway unreachable: no socket'] }), undefined);
    expect(a.map((x) => x.id)).toEqual(['daemon-down']);
    expect(a[0].text).toContain('no socket');
  });

  it('reports fail-open, BPF not loaded and a full cache', () => {
    const gw: GatewayHealth = { ...okGateway, fail_open: true, hybla: { ...okGateway.hybla, loaded: false, implementation: 'none', problem: 'verifier refused' } };
    const a = alertsFrom(health({ gateway: gw }), { enabled: true, disk_used_bytes: 99, disk_capacity_bytes: 100 });
    expect(a.map((x) => x.id)).toEqual(['fail-open', 'bpf-not-loaded', 'cache-full']);
    expect(a[1].text).toContain('verifier refused');
  });

  it('does not call a cache the gateway runs off full', () => {
    expect(alertsFrom(health({}), { enabled: false, disk_used_bytes: 99, disk_capacity_bytes: 100 })).toEqual([]);
  });
});
