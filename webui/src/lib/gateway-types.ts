// Shapes the API passes through from the gateway control protocol (docs/control-protocol.md).
export interface TcpInfo {
  cc: string;
  state: string;
  srtt_us: number;
  rttvar_us: number;
  min_rtt_us: number;
  cwnd: number;
  ssthresh: number;
  mss: number;
  retrans_total: number;
  lost: number;
  delivery_rate_bps: number;
  pacing_rate_bps: number;
  bytes_acked: number;
  bytes_received: number;
  notsent_bytes: number;
}

export type FlowState = 'connecting' | 'established' | 'half_closed' | 'closed';
export type Action = 'accelerate' | 'cache' | 'bypass';
/** How a flow crossed the satellite: the gateway's own connection, or the peer path (a warm,
 * authenticated connection between terminal and hub, docs/splitter.md). */
export type FlowPath = 'direct' | 'peer';

export interface Flow {
  id: number;
  state: FlowState | string;
  class: string;
  action: Action | string;
  client: string;
  server: string;
  family: number;
  started_at: number;
  ended_at: number | null;
  end_reason: string | null;
  bytes_up: number;
  bytes_down: number;
  rate_up_bps: number;
  rate_down_bps: number;
  legs?: { client?: TcpInfo | null; server?: TcpInfo | null; satellite?: 'client' | 'server' | string } | null;
  /** Absent from gateways older than the peer path: treat as direct. */
  path?: FlowPath | string | null;
}

export const PATH_LABEL: Record<string, string> = { direct: 'direct', peer: 'peer path' };

export function pathOf(flow: { path?: string | null }): FlowPath | string {
  return flow.path ?? 'direct';
}

export interface ActionBytes {
  bytes_up?: number;
  bytes_down?: number;
  flows?: number;
  packets?: number;
  bytes?: number;
}

export interface Counters {
  flows_live: number;
  flows_total: number;
  flows_unsplit_overflow: number;
  flows_failed_connect: number;
  bytes_up: number;
  bytes_down: number;
  by_action: Record<string, ActionBytes>;
  /** Flows started on the peer path, those that fell back to the direct path, peer connections refused. */
  peer?: { flows: number; fallbacks: number; refused: number };
  quic_rejected?: { packets: number; bytes: number };
}

export interface HyblaStatus {
  implementation: 'kernel' | 'bpf' | 'none' | string;
  loaded: boolean;
  rtt0_ms: number;
  base_rtt_ms: number;
  available: string[];
  problem: string | null;
}

/** The satellite-facing leg's TCP_INFO, and the terrestrial one. */
export function legsOf(flow: Flow): { satellite: TcpInfo | null; terrestrial: TcpInfo | null } {
  const legs = flow.legs;
  if (!legs) return { satellite: null, terrestrial: null };
  const satSide = legs.satellite === 'client' ? 'client' : 'server';
  const other = satSide === 'client' ? 'server' : 'client';
  return { satellite: legs[satSide] ?? null, terrestrial: legs[other] ?? null };
}
