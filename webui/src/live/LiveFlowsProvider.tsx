import { useCallback, useMemo, useState, type ReactNode } from 'react';
import { applyStreamEvent, emptyLiveState, FLOWS_EVENT, type LiveFlowsState } from './flow-stream';
import { LiveFlowsContext } from './LiveFlowsContext';
import { useEventStream } from './useEventStream';

export const FLOW_STREAM_URL = '/api/v1/flows/stream';
const NAMED_EVENTS = [FLOWS_EVENT];

/** Keeps one SSE connection to the live flow stream for every page below it. */
export function LiveFlowsProvider({ children, EventSourceImpl }: { children: ReactNode; EventSourceImpl?: typeof EventSource }) {
  const [state, setState] = useState<LiveFlowsState>(emptyLiveState);
  const onEvent = useCallback((type: string, data: unknown) => setState((s) => applyStreamEvent(s, type, data)), []);
  const stream = useEventStream(FLOW_STREAM_URL, onEvent, { events: NAMED_EVENTS, EventSourceImpl });
  const value = useMemo(
    () => ({
      flows: [...state.flows.values()],
      byId: state.flows,
      now: state.now,
      error: state.error,
      status: stream.status,
      reconnects: stream.reconnects,
      updates: state.updates,
    }),
    [state, stream.status, stream.reconnects],
  );
  return <LiveFlowsContext.Provider value={value}>{children}</LiveFlowsContext.Provider>;
}
