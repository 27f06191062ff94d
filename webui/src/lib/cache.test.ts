import { describe, expect, it } from 'vitest';
import { cacheView, savingsWords } from './cache';

describe('cacheView', () => {
  it('reads the gateway fields, not guesses', () => {
    const v = cacheView({
      enabled: true,
      running: true,
      requests: 120,
      hits: 90,
      misses: 10,
      denied: 20,
      bytes_saved_satellite: 971_587,
      store_entries: 106,
      disk_used_bytes: 50,
      disk_capacity_bytes: 200,
      memory_used_bytes: 10,
      memory_capacity_bytes: 100,
      hit_ratio_bytes: 0.5,
    });
    expect(v.hitRatio).toBe(0.9);
    expect(v.savedBytes).toBe(971_587);
    expect(v.objects).toBe(106);
    expect(v.fullness).toBe(0.25);
    expect(v.enabled && v.running).toBe(true);
  });

  it('keeps unknown unknown and says disabled only when the gateway runs it off', () => {
    const v = cacheView({ enabled: false, running: false, requests: 0, hits: 0, misses: 0, store_entries: null });
    expect(v.hitRatio).toBeNull();
    expect(v.objects).toBeNull();
    expect(v.fullness).toBeNull();
    expect(v.enabled).toBe(false);
    expect(cacheView(undefined).enabled).toBe(false);
    // Memory-only store: fullness from memory.
    expect(cacheView({ memory_used_bytes: 30, memory_capacity_bytes: 60 }).fullness).toBe(0.5);
  });
});

describe('savingsWords', () => {
  it('names what a hit saves by where the cache is', () => {
    expect(savingsWords('terminal').title).toBe('Satellite capacity saved');
    expect(savingsWords('hub').title).toBe('Backhaul saved');
    expect(savingsWords('hub').hint).toMatch(/still crossed the satellite/);
    expect(savingsWords('terminal').hint).toMatch(/never crossed the satellite/);
  });
});
