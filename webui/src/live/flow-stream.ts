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

/** Each field of the API's FlowsEvent model and the check of its type there: a field the model gains or loses
 * fails to compile here (the mapped type), so the dashboard reads exactly what the API sends. */
const FIELD_CHECKS: { [K in keyof FlowsEvent]-?: (v: unknown) => boolean } = {
  flows: Array.isArray,
  now: (v) => typeof v === 'number',
  seq: (v) => typeof v === 'number',
  error: (v) => v === null || typeof v === 'string',
};
export const FLOWS_EVENT_FIELDS = Object.keys(FIELD_CHECKS) as (keyof FlowsEvent)[];

function isFlowsEvent(v: unknown): v is FlowsEvent {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const d = v as Record<string, unknown>;
  return Object.keys(d).length === FLOWS_EVENT_FIELDS.length && FLOWS_EVENT_FIELDS.every((k) => k in d && FIELD_CHECKS[k](d[k]));
}

/** Folds one `flows` event (the whole live table) into the state; anything else leaves it as it is. */
export function applyStreamEvent(state: LiveFlowsState, type: string, data: unknown): LiveFlowsState {
  if (type !== FLOWS_EVENT || !isFlowsEvent(data)) return state;
  const flows = new Map<number, Flow>();
  for (const f of data.flows) flows.set(f.id, f);
  return { flows, now: data.now, error: data.error, updates: state.updates + 1 };
}
