import type { SeriesOut } from '../api/endpoints';

export type Row = { t: number } & Record<string, number | null>;

/** Pivots the API's per-key series into chart rows: one row per timestamp, one column per key. */
export function seriesToRows(out: SeriesOut | undefined, scale = 1, field: 'avg' | 'max' = 'avg'): Row[] {
  if (!out) return [];
  const byTs = new Map<number, Row>();
  for (const s of out.series) {
    for (const p of s.points) {
      let row = byTs.get(p.ts);
      if (!row) {
        row = { t: p.ts } as Row;
        byTs.set(p.ts, row);
      }
      row[s.key || 'value'] = p[field] * scale;
    }
  }
  return [...byTs.values()].sort((a, b) => a.t - b.t);
}

/** The last value of one key, or null. */
export function latest(out: SeriesOut | undefined, key: string): number | null {
  const s = out?.series.find((x) => x.key === key);
  const p = s?.points[s.points.length - 1];
  return p ? p.avg : null;
}
