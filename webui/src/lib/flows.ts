// Helpers on the gateway's Flow record (generated type: src/api/schema.gen.ts, from the gateway's schema).
import type { CcReason, Flow, FlowPath, Relay, SatelliteLeg, TcpInfo } from '../api/endpoints';
import { reportChoices } from './system-config';

/** How a flow crossed the satellite: the gateway's own connection, or the peer path (a warm,
 * authenticated connection between terminal and hub, docs/splitter.md). */
export const PATH_LABEL: Record<FlowPath, string> = { direct: 'direct', peer: 'peer path' };

/** The path filter's choices: the gateway's FlowPath values, each with its label. */
export const PATH_CHOICES: { value: string; label: string }[] = reportChoices('FlowPath').map((value) => ({
  value,
  label: PATH_LABEL[value as FlowPath] ?? value,
}));

/** Who terminated the client's connection: a split flow, or the cache (Squid). */
export const RELAY_LABEL: Record<Relay, string> = { splitter: 'split', squid: 'cache (Squid)' };

export function pathOf(flow: Pick<Flow, 'path'>): FlowPath {
  return flow.path ?? 'direct';
}

/** The satellite-facing leg's TCP_INFO, and the terrestrial one. */
export function legsOf(flow: Flow): { satellite: TcpInfo | null; terrestrial: TcpInfo | null } {
  const legs = flow.legs;
  if (!legs) return { satellite: null, terrestrial: null };
  const satSide = legs.satellite === 'client' ? 'client' : 'server';
  const other = satSide === 'client' ? 'server' : 'client';
  return { satellite: legs[satSide] ?? null, terrestrial: legs[other] ?? null };
}

/** What crossed the satellite leg (delivered, from the kernel's counters of the satellite-facing socket), toward
 * the client (down) and toward the server (up); `queuedDown` is what the gateway holds that has not crossed yet
 * (relayed from the server but not delivered over the satellite). A transfer is done when that is 0, not when the
 * server finished handing it over. Null for a flow without legs. */
export function satelliteBytes(flow: Flow): { down: number; up: number; queuedDown: number } | null {
  const legs = flow.legs;
  if (!legs) return null;
  const atClient = legs.satellite === 'client';
  const sat = atClient ? legs.client : legs.server;
  if (!sat) return null;
  // At a hub the satellite socket sends toward the client (its acked bytes went down); at a terminal it receives.
  const down = atClient ? sat.bytes_acked : sat.bytes_received;
  const up = atClient ? sat.bytes_received : sat.bytes_acked;
  return { down, up, queuedDown: Math.max(0, flow.bytes_down - down) };
}

/** Why a satellite leg runs its congestion control (the gateway's CcReason): a short badge and what it means. */
export const CC_REASON: Record<CcReason, { badge: string; color: string; means: string }> = {
  default: { badge: 'default', color: 'gray', means: "the config's default (satellite.congestion_control)" },
  class: { badge: 'class', color: 'indigo', means: "the flow's traffic class names it" },
  fallback: { badge: 'fallback', color: 'red', means: 'the one asked for is not registered on this gateway: hybla for hybla_ld, else the system default' },
  automatic: { badge: 'auto', color: 'teal', means: 'the default, switched by the gateway: to hybla on a DAMA/BoD link (an RTT that shows a capacity allocation delay), or from plain hybla to BBR on a short (non-GEO) path' },
};

/** The flow's satellite leg (congestion control, why, retransmissions); null from a gateway that does not report it. */
export function satelliteLegOf(flow: Pick<Flow, 'satellite'>): SatelliteLeg | null {
  return flow.satellite ?? null;
}

/** "1.25 %": a retransmission share; "—" when nothing was sent. */
export function formatRetransmit(pct: number | null | undefined, sent = 1): string {
  if (pct == null || sent === 0) return '—';
  return `${pct < 10 ? pct.toFixed(2) : pct.toFixed(1)} %`;
}

/** The share of the segments sent between two samples of one leg that were retransmissions, percent; null when
 * nothing was sent between them (or the counts went back: another flow under the same id). */
type LegCounts = Pick<SatelliteLeg, 'segments_sent' | 'segments_retransmitted'>;

export function retransmitBetween(prev: LegCounts | null, cur: LegCounts | null): number | null {
  if (!prev || !cur) return null;
  const sent = cur.segments_sent - prev.segments_sent;
  const again = cur.segments_retransmitted - prev.segments_retransmitted;
  if (sent <= 0 || again < 0) return null;
  return (100 * again) / sent;
}
