// The time ranges the dashboard's charts offer, over the API's rollups (1 s, 1 min, 1 h samples).
export interface TimeRange {
  value: '15m' | '1h' | '24h' | '7d';
  label: string;
  seconds: number;
  /** How often a chart over it asks again. */
  refreshMs: number;
}

export const RANGES: TimeRange[] = [
  { value: '15m', label: '15 min', seconds: 15 * 60, refreshMs: 5_000 },
  { value: '1h', label: '1 h', seconds: 3600, refreshMs: 15_000 },
  { value: '24h', label: '24 h', seconds: 86_400, refreshMs: 60_000 },
  { value: '7d', label: '7 d', seconds: 7 * 86_400, refreshMs: 300_000 },
];

export const DEFAULT_RANGE = RANGES[0];

/** The range a URL parameter names, else the default. */
export function rangeOf(param: string | null | undefined): TimeRange {
  return RANGES.find((r) => r.value === param) ?? DEFAULT_RANGE;
}

/** "last 15 min", for chart labels read by screen readers. */
export function describeRange(r: TimeRange): string {
  return `last ${r.label}`;
}
