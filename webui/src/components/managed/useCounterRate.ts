import { useRef } from 'react';

export interface Rate {
  rx_bps: number;
  tx_bps: number;
}

/**
 * Throughput from a terminal's byte counters as its reports bring them: bits per second between its last two
 * reports (null until two have arrived, or when a counter went back, i.e. the terminal restarted).
 */
export function useCounterRate(at: number | null, rx: number | null, tx: number | null): Rate | null {
  const samples = useRef<{ at: number; rx: number; tx: number }[]>([]);
  if (at != null && rx != null && tx != null) {
    const list = samples.current;
    if (!list.length || list[list.length - 1].at !== at) samples.current = [...list.slice(-1), { at, rx, tx }];
  }
  const [a, b] = samples.current;
  if (!a || !b || b.at <= a.at || b.rx < a.rx || b.tx < a.tx) return null;
  const dt = b.at - a.at;
  return { rx_bps: ((b.rx - a.rx) * 8) / dt, tx_bps: ((b.tx - a.tx) * 8) / dt };
}
