import { describe, expect, it } from 'vitest';
import { dnsView, formatWait } from './dns';

describe('dnsView', () => {
  it('derives the hit ratio and keeps unknown or missing fields harmless', () => {
    const v = dnsView({ enabled: true, running: true, queries: 200, cache_hits: 150, satellite_time_saved_s: 90, mean_upstream_ms: 600, upstream_healthy: false, upstream_probe: [{ upstream: '10.71.3.53@53', ok: false, rtt_ms: null, error: 'no answer' }], extra: 'x' });
    expect(v.hitRatio).toBe(0.75);
    expect(v.savedSeconds).toBe(90);
    expect(v.upstreamHealthy).toBe(false);
    expect(v.probe[0].upstream).toBe('10.71.3.53@53');
    const empty = dnsView(undefined);
    expect([empty.hitRatio, empty.meanUpstreamMs, empty.enabled, empty.upstreamHealthy]).toEqual([null, null, false, true]);
    expect(dnsView({ queries: 'many', cache_hits: Number.NaN }).hitRatio).toBeNull();
  });
});

describe('formatWait', () => {
  it('reads like a waiting time at every scale', () => {
    expect(formatWait(0.6)).toBe('600 ms');
    expect(formatWait(12.44)).toBe('12.4 s');
    expect(formatWait(200)).toBe('3 min 20 s');
    expect(formatWait(7500)).toBe('2 h 05 min');
    expect(formatWait(null)).toBe('—');
  });
});
