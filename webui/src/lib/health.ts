import type { GatewayHealth, HealthOut } from '../api/endpoints';
import { cacheView } from './cache';

export interface DashboardAlert {
  id: string;
  level: 'red' | 'orange' | 'yellow';
  title: string;
  text: string;
}

/** The gateway's own health answer, passed through by the API (docs/control-protocol.md). */
export function gatewayHealth(h: HealthOut | undefined): GatewayHealth | null {
  return h?.gateway ?? null;
}

/** Everything an operator must notice, most severe first. `cacheStats`: the gateway's own (what it runs). */
export function alertsFrom(health: HealthOut | undefined, cacheStats: Record<string, unknown> | undefined): DashboardAlert[] {
  const out: DashboardAlert[] = [];
  if (!health) return out;
  const gw = gatewayHealth(health);
  if (!health.gateway_reachable) {
    out.push({ id: 'daemon-down', level: 'red', title: 'Gateway daemon down', text: health.problems.join('; ') || 'The API cannot reach the gateway control socket.' });
  }
  if (gw?.fail_open) {
    out.push({
      id: 'fail-open',
      level: 'red',
      title: 'Fail-open: traffic passes unaccelerated',
      text: 'The gateway is forwarding traffic without splitting or caching it (the daemon is not intercepting).',
    });
  }
  if (gw?.hybla && (!gw.hybla.loaded || gw.hybla.implementation === 'none')) {
    out.push({
      id: 'bpf-not-loaded',
      level: 'orange',
      title: 'Hybla (BPF) not loaded',
      text: `The satellite leg falls back to ${gw.hybla.available?.join(' / ') || 'the default congestion control'}${gw.hybla.problem ? `: ${gw.hybla.problem}` : ''}.`,
    });
  }
  const cache = cacheView(cacheStats);
  const full = cache.fullness;
  if (cache.enabled && full != null && full >= 0.95) {
    out.push({ id: 'cache-full', level: 'orange', title: 'Cache full', text: `The cache store is ${(full * 100).toFixed(0)} % full; old objects are being evicted.` });
  }
  for (const p of gw?.problems ?? []) out.push({ id: `gw-${p}`, level: 'yellow', title: 'Gateway problem', text: p });
  return out;
}
