// The cache's figures as the gateway reports them (GET /v1/cache/stats, perigee_squid::CacheStats), named for an
// operator: no field guessing, and "unknown" stays unknown instead of showing 0.
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

export interface CacheView {
  /** The config the gateway runs has the cache on. */
  enabled: boolean;
  /** Squid is running. */
  running: boolean;
  requests: number;
  hits: number;
  misses: number;
  /** Hits over hits + misses (refused requests are not cacheable traffic); null before any. */
  hitRatio: number | null;
  /** Of the bytes sent to clients, the share that came from the cache. */
  byteHitRatio: number | null;
  /** Bytes served from the cache: what did not cross the satellite. */
  savedBytes: number | null;
  fromOriginBytes: number | null;
  toClientsBytes: number | null;
  objects: number | null;
  diskUsed: number | null;
  diskCapacity: number | null;
  memoryUsed: number | null;
  memoryCapacity: number | null;
  /** How full the disk store is (0..1), or the memory store when there is no disk store; null if unknown. */
  fullness: number | null;
  problems: string[];
}

export function cacheView(s: Record<string, unknown> | undefined): CacheView {
  const st = s ?? {};
  const hits = num(st.hits) ?? 0;
  const misses = num(st.misses) ?? 0;
  const diskUsed = num(st.disk_used_bytes);
  const diskCapacity = num(st.disk_capacity_bytes);
  const memoryUsed = num(st.memory_used_bytes);
  const memoryCapacity = num(st.memory_capacity_bytes);
  let fullness: number | null = null;
  if (diskUsed != null && diskCapacity) fullness = diskUsed / diskCapacity;
  else if (memoryUsed != null && memoryCapacity) fullness = memoryUsed / memoryCapacity;
  return {
    enabled: st.enabled === true,
    running: st.running === true,
    requests: num(st.requests) ?? 0,
    hits,
    misses,
    hitRatio: hits + misses > 0 ? hits / (hits + misses) : null,
    byteHitRatio: num(st.hit_ratio_bytes),
    savedBytes: num(st.bytes_saved_satellite),
    fromOriginBytes: num(st.bytes_from_origin),
    toClientsBytes: num(st.bytes_to_clients),
    objects: num(st.store_entries),
    diskUsed,
    diskCapacity,
    memoryUsed,
    memoryCapacity,
    fullness,
    problems: Array.isArray(st.problems) ? st.problems.filter((p): p is string => typeof p === 'string') : [],
  };
}

/** What a cache hit saves depends on where the cache is: a terminal's saves satellite capacity, a hub's only the
 * terrestrial backhaul behind it (the object still crosses the satellite to the client: docs/cache.md). */
export interface SavingsWords {
  /** A card's or a column's title. */
  title: string;
  /** One line on what that means. */
  hint: string;
  /** The resource in a sentence ("satellite capacity"). */
  resource: string;
}

export function savingsWords(role: 'hub' | 'terminal' | null | undefined): SavingsWords {
  if (role === 'terminal') {
    return { title: 'Satellite capacity saved', hint: 'served from the cache at the terminal: never crossed the satellite', resource: 'satellite capacity' };
  }
  return {
    title: 'Backhaul saved',
    hint: "served from the hub's cache: no terrestrial fetch, but it still crossed the satellite",
    resource: 'terrestrial backhaul',
  };
}
