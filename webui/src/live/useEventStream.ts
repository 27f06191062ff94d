import { useEffect, useRef, useState } from 'react';

export type StreamStatus = 'connecting' | 'open' | 'reconnecting' | 'closed';

export interface EventStreamOptions {
  /** The named SSE event types to listen to: only these reach onEvent (unnamed "message" events do not). */
  events: readonly string[];
  enabled?: boolean;
  /** Injected for tests; defaults to the browser's EventSource. */
  EventSourceImpl?: typeof EventSource;
  /** First retry delay after the server closed the stream; doubles up to maxDelayMs. */
  initialDelayMs?: number;
  maxDelayMs?: number;
}

export interface EventStreamState {
  status: StreamStatus;
  reconnects: number;
  lastEventAt: number | null;
}

/**
 * Subscribes to a Server-Sent Events stream and calls onEvent(type, parsedJson) for each event of the named types
 * whose data is JSON (what the API's stream sends; anything else is dropped).
 * The browser retries by itself while readyState is CONNECTING; when it gives up (CLOSED, e.g. after
 * an HTTP error or a restart of the API), this hook reopens the stream with exponential back-off.
 */
export function useEventStream(
  url: string,
  onEvent: (type: string, data: unknown) => void,
  options: EventStreamOptions,
): EventStreamState {
  const { enabled = true, initialDelayMs = 1000, maxDelayMs = 15000 } = options;
  const Impl = options.EventSourceImpl ?? (typeof EventSource !== 'undefined' ? EventSource : undefined);
  const eventsKey = options.events.join(',');
  const handler = useRef(onEvent);
  useEffect(() => {
    handler.current = onEvent;
  }, [onEvent]);
  const [state, setState] = useState<EventStreamState>({ status: 'connecting', reconnects: 0, lastEventAt: null });

  useEffect(() => {
    if (!enabled || !Impl) return;
    let source: EventSource | null = null;
    let timer: ReturnType<typeof setTimeout> | null = null;
    let delay = initialDelayMs;
    let stopped = false;
    const types = eventsKey ? eventsKey.split(',') : [];

    const dispatch = (type: string) => (ev: MessageEvent) => {
      let data: unknown;
      try {
        data = JSON.parse(ev.data as string);
      } catch {
        return; // the API's events are JSON: anything else is not one of them
      }
      setState((s) => ({ ...s, status: 'open', lastEventAt: Date.now() }));
      handler.current(type, data);
    };

    const open = () => {
      if (stopped) return;
      source = new Impl(url, { withCredentials: true });
      source.onopen = () => {
        delay = initialDelayMs;
        setState((s) => ({ ...s, status: 'open' }));
      };
      for (const t of types) source.addEventListener(t, dispatch(t) as EventListener);
      source.onerror = () => {
        if (!source || stopped) return;
        if (source.readyState === 2 /* CLOSED */) {
          source.close();
          source = null;
          setState((s) => ({ ...s, status: 'reconnecting', reconnects: s.reconnects + 1 }));
          timer = setTimeout(open, delay);
          delay = Math.min(delay * 2, maxDelayMs);
        } else {
          setState((s) => ({ ...s, status: 'reconnecting' }));
        }
      };
    };
    setState((s) => ({ ...s, status: 'connecting' }));
    open();
    return () => {
      stopped = true;
      if (timer) clearTimeout(timer);
      source?.close();
    };
  }, [url, enabled, Impl, eventsKey, initialDelayMs, maxDelayMs]);

  return state;
}
