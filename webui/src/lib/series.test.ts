import { describe, expect, it } from 'vitest';
import { latest, seriesToRows } from './series';

const out = {
  metric: 'link_bps',
  resolution_s: 1,
  step_s: 5,
  start: 0,
  end: 20,
  series: [
    { key: 'up', points: [{ ts: 10, avg: 1, max: 2 }, { ts: 15, avg: 3, max: 4 }] },
    { key: 'down', points: [{ ts: 15, avg: 30, max: 40 }, { ts: 5, avg: 10, max: 10 }] },
  ],
};

describe('seriesToRows', () => {
  it('pivots keys into columns, ordered by time', () => {
    expect(seriesToRows(out)).toEqual([{ t: 5, down: 10 }, { t: 10, up: 1 }, { t: 15, up: 3, down: 30 }]);
    expect(seriesToRows(out, 8, 'max')[2]).toEqual({ t: 15, up: 32, down: 320 });
    expect(latest(out, 'up')).toBe(3);
    expect(seriesToRows(undefined)).toEqual([]);
  });
});
