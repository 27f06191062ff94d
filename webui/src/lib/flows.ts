// Helpers on the gateway's Flow record (generated type: src/api/schema.gen.ts, from the gateway's schema).
import type { Flow, FlowPath, Relay, TcpInfo } from '../api/endpoints';

/** How a flow crossed the satellite: the gateway's own connection, or the peer path (a warm,
 * authenticated connection between terminal and hub, docs/splitter.md). */
export const PATH_LABEL: Record<FlowPath, string> = { direct: 'direct', peer: 'peer path' };

/** Who terminated the client's connection: a split flow, or the cache (Squid). */
export const RELAY_LABEL: Record<Relay, string> = { splitter: 'split', squid: 'cache (Squid)' };

/** The gateway's name for clients no configured site covers. */
export const OTHER_SITE = 'other';

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
