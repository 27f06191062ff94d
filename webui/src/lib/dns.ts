// The resolver's stats (GET /api/v1/dns/stats, docs/dns.md) as the dashboard shows them.

import type { ProbeResult } from '../api/endpoints';

export interface DnsView {
  enabled: boolean;
  running: boolean;
  queries: number;
  hits: number;
  hitRatio: number | null;
  staleAnswers: number;
  prefetches: number;
  meanUpstreamMs: number | null;
  savedSeconds: number;
  memoryUsed: number | null;
  memoryCapacity: number | null;
  upstreamHealthy: boolean;
  probe: ProbeResult[];
}

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/** The resolver's report (typed by the gateway's schema; a newer gateway may add fields) into what the page shows. */
export function dnsView(s: Record<string, unknown> | undefined): DnsView {
  const queries = num(s?.queries) ?? 0;
  const hits = num(s?.cache_hits) ?? 0;
  const probe = Array.isArray(s?.upstream_probe) ? (s.upstream_probe as ProbeResult[]) : [];
  return {
    enabled: s?.enabled === true,
    running: s?.running === true,
    queries,
    hits,
    hitRatio: queries > 0 ? hits / queries : null,
    staleAnswers: num(s?.stale_answers) ?? 0,
    prefetches: num(s?.prefetches) ?? 0,
    meanUpstreamMs: num(s?.mean_upstream_ms),
    savedSeconds: num(s?.satellite_time_saved_s) ?? 0,
    memoryUsed: num(s?.cache_memory_used_bytes),
    memoryCapacity: num(s?.cache_memory_capacity_bytes),
    upstreamHealthy: s?.upstream_healthy !== false,
    probe,
  };
}

/** Waiting time: "850 ms", "12.4 s", "3 min 20 s", "2 h 05 min". */
export function formatWait(seconds: number | null | undefined): string {
  if (seconds == null || !Number.isFinite(seconds)) return '—';
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const s = Math.round(seconds);
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
}
