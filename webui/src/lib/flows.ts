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
