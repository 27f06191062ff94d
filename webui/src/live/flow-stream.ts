import type { Flow, FlowsEvent } from '../api/endpoints';

/** The one event the API's live stream sends (GET /api/v1/flows/stream; the API's FlowsEvent model). */
export const FLOWS_EVENT = 'flows';

export interface LiveFlowsState {
  flows: Map<number, Flow>;
  /** Gateway clock of the last update (epoch seconds). */
  now: number | null;
  /** Why the API's last read of the gateway failed (the table is then the last one it had). */
  error: string | null;
  updates: number;
}

export const emptyLiveState: LiveFlowsState = { flows: new Map(), now: null, error: null, updates: 0 };

function isFlowsEvent(v: unknown): v is FlowsEvent {
  const d = v as FlowsEvent;
  return typeof v === 'object' && v !== null && Array.isArray(d.flows) && typeof d.now === 'number';
}

/** Folds one `flows` event (the whole live table) into the state; anything else leaves it as it is. */
export function applyStreamEvent(state: LiveFlowsState, type: string, data: unknown): LiveFlowsState {
  if (type !== FLOWS_EVENT || !isFlowsEvent(data)) return state;
  const flows = new Map<number, Flow>();
  for (const f of data.flows) flows.set(f.id, f);
  return { flows, now: data.now, error: data.error ?? null, updates: state.updates + 1 };
}
