import type { Flow } from '../api/endpoints';

export interface LiveFlowsState {
  flows: Map<number, Flow>;
  /** Gateway clock of the last update (epoch seconds). */
  now: number | null;
  /** Extra payload the stream carries next to flows (counters, rates…), last value. */
  extra: Record<string, unknown>;
  updates: number;
}

export const emptyLiveState: LiveFlowsState = { flows: new Map(), now: null, extra: {}, updates: 0 };

function isFlow(v: unknown): v is Flow {
  return typeof v === 'object' && v !== null && typeof (v as Flow).id === 'number';
}

/**
 * Folds one SSE event into the live flow table. Accepted shapes:
 *  - a snapshot `{"flows":[...], "now":...}` (replaces the table),
 *  - a delta `{"delta":true, "flows":[changed...], "closed":[ids]}` (merges),
 *  - named events "flow" / "flow_closed" with one flow each.
 */
export function applyStreamEvent(state: LiveFlowsState, type: string, data: unknown): LiveFlowsState {
  if (typeof data !== 'object' || data === null) return state;
  const d = data as Record<string, unknown>;

  if (type === 'flow' && isFlow(d)) {
    const flows = new Map(state.flows);
    flows.set(d.id, d);
    return { ...state, flows, updates: state.updates + 1 };
  }
  if (type === 'flow_closed' || type === 'closed') {
    const flows = new Map(state.flows);
    const id = isFlow(d) ? d.id : (d.id as number);
    flows.delete(id);
    return { ...state, flows, updates: state.updates + 1 };
  }

  const list = Array.isArray(d.flows) ? d.flows.filter(isFlow) : null;
  const now = typeof d.now === 'number' ? d.now : typeof d.ts === 'number' ? d.ts : state.now;
  const extra = { ...state.extra };
  for (const [k, v] of Object.entries(d)) if (k !== 'flows' && k !== 'closed' && k !== 'removed') extra[k] = v;

  if (!list) return { ...state, now, extra, updates: state.updates + 1 };
  const isDelta = d.delta === true || d.kind === 'delta' || d.type === 'delta' || type === 'delta';
  const flows = isDelta ? new Map(state.flows) : new Map<number, Flow>();
  for (const f of list) flows.set(f.id, f);
  const gone = (Array.isArray(d.closed) ? d.closed : Array.isArray(d.removed) ? d.removed : []) as unknown[];
  for (const g of gone) flows.delete(typeof g === 'number' ? g : isFlow(g) ? g.id : NaN);
  return { flows, now, extra, updates: state.updates + 1 };
}
