import { createContext, useContext } from 'react';
import type { Flow } from '../api/endpoints';
import type { StreamStatus } from './useEventStream';

export interface LiveFlows {
  flows: Flow[];
  byId: Map<number, Flow>;
  now: number | null;
  /** Why the API's last read of the gateway failed; null when it did not. */
  error: string | null;
  status: StreamStatus;
  reconnects: number;
  updates: number;
}

export const LiveFlowsContext = createContext<LiveFlows>({
  flows: [],
  byId: new Map(),
  now: null,
  error: null,
  status: 'closed',
  reconnects: 0,
  updates: 0,
});

export function useLiveFlows(): LiveFlows {
  return useContext(LiveFlowsContext);
}
