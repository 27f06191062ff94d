import type { ClassAction, Flow, TcpInfo } from '../api/endpoints';

function tcp(srttUs: number, cwnd: number, rate: number): TcpInfo {
  return {
    cc: 'hybla', state: 'established', srtt_us: srttUs, rttvar_us: srttUs / 10, min_rtt_us: srttUs * 0.9,
    cwnd, ssthresh: 2147483647, mss: 1448, retrans_total: 0, lost: 0, delivery_rate_bps: rate,
    pacing_rate_bps: rate * 1.2, bytes_acked: 0, bytes_received: 0, notsent_bytes: 0, bytes_sent: 0, bytes_retrans: 0,
    segs_out: 0, segs_in: 0, data_segs_out: 0, data_segs_in: 0, timestamps: true, tx_bps: rate, rx_bps: 0,
  };
}

/** Deterministic synthetic flows for tests and for sizing the table. */
export function makeFlows(n: number): Flow[] {
  const actions: ClassAction[] = ['accelerate', 'cache', 'bypass'];
  return Array.from({ length: n }, (_, i) => ({
    id: i + 1,
    state: i % 10 === 0 ? 'connecting' : 'established',
    class: i % 3 === 0 ? 'web' : 'bulk',
    action: actions[i % 3],
    client: `10.71.1.${10 + (i % 2)}:${40000 + (i % 20000)}`,
    server: `10.71.3.10:${i % 2 ? 80 : 5001}`,
    family: 4,
    started_at: 1_700_000_000 + i,
    ended_at: null,
    end_reason: null,
    bytes_up: (i * 37) % 100_000,
    bytes_down: (i * 7919) % 10_000_000,
    rate_up_bps: 1000 * (i % 50),
    rate_down_bps: 100_000 * ((i * 13) % 97),
    legs: { client: tcp(600_000, 10 + (i % 90), 2e6), server: tcp(20_000, 10, 5e6), satellite: 'client' },
    path: i % 4 === 0 ? 'direct' : 'peer',
    relay: 'splitter',
    site: 'other',
    // Every 7th flow comes from a gateway that does not report the satellite leg.
    satellite:
      i % 7 === 6
        ? null
        : {
            cc: i % 5 === 2 ? 'bbr' : 'hybla_ld',
            cc_reason: i % 5 === 2 ? (i % 2 ? 'class' : 'automatic') : 'default',
            segments_sent: 1000 + i,
            segments_retransmitted: i % 13,
            retransmit_pct: (100 * (i % 13)) / (1000 + i),
          },
  }));
}
