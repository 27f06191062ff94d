import { describe, expect, it } from 'vitest';
import { describeRange, rangeOf, RANGES } from './ranges';

describe('chart ranges', () => {
  it('offers 15 min, 1 h, 24 h and 7 d, and falls back to the first', () => {
    expect(RANGES.map((r) => r.seconds)).toEqual([900, 3600, 86400, 604800]);
    expect(rangeOf('24h').seconds).toBe(86400);
    expect(rangeOf('bogus').value).toBe('15m');
    expect(rangeOf(null).value).toBe('15m');
    expect(describeRange(rangeOf('7d'))).toBe('last 7 d');
  });
});
