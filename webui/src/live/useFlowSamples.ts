import { useEffect, useState } from 'react';
import type { Flow } from '../api/endpoints';
import { legsOf } from '../lib/flows';

export interface FlowSample {
  [key: string]: number | null;
  t: number;
  sat_rtt_ms: number | null;
  ter_rtt_ms: number | null;
  sat_cwnd: number | null;
  ter_cwnd: number | null;
  sat_rate_bps: number | null;
  ter_rate_bps: number | null;
}

export const MAX_SAMPLES = 600;

export function sampleOf(flow: Flow, t: number): FlowSample {
  const { satellite, terrestrial } = legsOf(flow);
  const ms = (us: number | null | undefined) => (us == null ? null : us / 1000);
  return {
    t,
    sat_rtt_ms: ms(satellite?.srtt_us),
    ter_rtt_ms: ms(terrestrial?.srtt_us),
    sat_cwnd: satellite?.cwnd ?? null,
    ter_cwnd: terrestrial?.cwnd ?? null,
    sat_rate_bps: satellite?.delivery_rate_bps ?? null,
    ter_rate_bps: terrestrial?.delivery_rate_bps ?? null,
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
      const next = [...s, sampleOf(flow, t)];
      return next.length > MAX_SAMPLES ? next.slice(next.length - MAX_SAMPLES) : next;
    });
  }, [flow, now]);
  return samples;
}
