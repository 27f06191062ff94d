import { useEffect, useState } from 'react';
import type { Flow } from '../api/endpoints';
import { legsOf, retransmitBetween } from '../lib/flows';

export interface FlowSample {
  [key: string]: number | null;
  t: number;
  sat_rtt_ms: number | null;
  ter_rtt_ms: number | null;
  sat_cwnd: number | null;
  ter_cwnd: number | null;
  sat_rate_bps: number | null;
  ter_rate_bps: number | null;
  /** The satellite leg's counts so far (the gateway's `satellite` report), and the share of the segments sent
   * since the previous sample that were retransmissions, percent (null for the first sample, or nothing sent). */
  sat_segments_sent: number | null;
  sat_segments_retransmitted: number | null;
  sat_retrans_pct: number | null;
}

export const MAX_SAMPLES = 600;

export function sampleOf(flow: Flow, t: number, prev?: FlowSample): FlowSample {
  const { satellite, terrestrial } = legsOf(flow);
  const leg = flow.satellite ?? null;
  const before =
    prev && prev.sat_segments_sent != null && prev.sat_segments_retransmitted != null
      ? { segments_sent: prev.sat_segments_sent, segments_retransmitted: prev.sat_segments_retransmitted }
      : null;
  const ms = (us: number | null | undefined) => (us == null ? null : us / 1000);
  return {
    t,
    sat_rtt_ms: ms(satellite?.srtt_us),
    ter_rtt_ms: ms(terrestrial?.srtt_us),
    sat_cwnd: satellite?.cwnd ?? null,
    ter_cwnd: terrestrial?.cwnd ?? null,
    sat_rate_bps: satellite?.delivery_rate_bps ?? null,
    ter_rate_bps: terrestrial?.delivery_rate_bps ?? null,
    sat_segments_sent: leg?.segments_sent ?? null,
    sat_segments_retransmitted: leg?.segments_retransmitted ?? null,
    sat_retrans_pct: retransmitBetween(before, leg),
  };
}

/** Collects one sample per stream update of a flow while its page is open (bounded ring). */
export function useFlowSamples(flow: Flow | undefined, now: number | null): FlowSample[] {
  const [samples, setSamples] = useState<FlowSample[]>([]);
  useEffect(() => {
    if (!flow) return;
    const t = now ?? Date.now() / 1000;
    setSamples((s) => {
      if (s.length && s[s.length - 1].t === t) return s;
      const next = [...s, sampleOf(flow, t, s[s.length - 1])];
      return next.length > MAX_SAMPLES ? next.slice(next.length - MAX_SAMPLES) : next;
    });
  }, [flow, now]);
  return samples;
}
