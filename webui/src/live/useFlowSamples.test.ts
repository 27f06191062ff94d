import { describe, expect, it } from 'vitest';
import { makeFlows } from '../lib/fake-flows';
import { sampleOf } from './useFlowSamples';

describe('sampleOf', () => {
  it("rates the satellite leg's retransmissions between successive samples", () => {
    const f = makeFlows(1)[0];
    const at = (sent: number, again: number) => ({
      ...f,
      satellite: { cc: 'hybla_ld', cc_reason: 'default' as const, segments_sent: sent, segments_retransmitted: again, retransmit_pct: (100 * again) / sent },
    });
    const first = sampleOf(at(1000, 10), 1);
    expect(first.sat_retrans_pct).toBeNull();
    const second = sampleOf(at(1400, 30), 2, first);
    expect(second.sat_retrans_pct).toBe(5); // 20 of the 400 sent since
    expect(sampleOf(at(1400, 30), 3, second).sat_retrans_pct).toBeNull(); // nothing sent in between
    expect(sampleOf({ ...f, satellite: null }, 4, second).sat_retrans_pct).toBeNull();
  });
});
