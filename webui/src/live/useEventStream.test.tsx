import { act, renderHook } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { useEventStream } from './useEventStream';

/** A controllable stand-in for the browser's EventSource. */
class FakeEventSource {
  static instances: FakeEventSource[] = [];
  readyState = 0;
  onopen: ((e: Event) => void) | null = null;
  onmessage: ((e: MessageEvent) => void) | null = null;
  onerror: ((e: Event) => void) | null = null;
  listeners = new Map<string, ((e: MessageEvent) => void)[]>();
  closed = false;
  constructor(
    public url: string,
    public init?: EventSourceInit,
  ) {
    FakeEventSource.instances.push(this);
  }
  addEventListener(type: string, fn: (e: MessageEvent) => void) {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), fn]);
  }
  close() {
    this.closed = true;
    this.readyState = 2;
  }
  open() {
    this.readyState = 1;
    this.onopen?.(new Event('open'));
  }
  emit(data: unknown, type = 'message') {
    this.emitRaw(JSON.stringify(data), type);
  }
  emitRaw(data: string, type = 'message') {
    const ev = new MessageEvent(type, { data });
    if (type === 'message') this.onmessage?.(ev);
    for (const fn of this.listeners.get(type) ?? []) fn(ev);
  }
  /** The server went away for good: the browser stops retrying (readyState CLOSED). */
  fail() {
    this.readyState = 2;
    this.onerror?.(new Event('error'));
  }
  /** A transient drop: the browser retries by itself (readyState CONNECTING). */
  blip() {
    this.readyState = 0;
    this.onerror?.(new Event('error'));
  }
}

const Impl = FakeEventSource as unknown as typeof EventSource;
const latest = () => FakeEventSource.instances[FakeEventSource.instances.length - 1];

describe('useEventStream', () => {
  beforeEach(() => {
    FakeEventSource.instances = [];
    vi.useFakeTimers();
  });
  afterEach(() => vi.useRealTimers());

  it('parses the named JSON events and reports open', () => {
    const onEvent = vi.fn();
    const { result } = renderHook(() => useEventStream('/api/v1/flows/stream', onEvent, { EventSourceImpl: Impl, events: ['flows'] }));
    expect(result.current.status).toBe('connecting');
    expect(latest().init).toEqual({ withCredentials: true });
    act(() => latest().open());
    expect(result.current.status).toBe('open');
    act(() => latest().emit({ flows: [] }, 'flows'));
    expect(onEvent).toHaveBeenCalledExactlyOnceWith('flows', { flows: [] });
  });

  it('passes on nothing the API does not send: unnamed events, other names, non-JSON data', () => {
    const onEvent = vi.fn();
    renderHook(() => useEventStream('/s', onEvent, { EventSourceImpl: Impl, events: ['flows'] }));
    act(() => latest().open());
    act(() => latest().emit({ a: 1 }));
    act(() => latest().emit({ flows: [] }, 'delta'));
    act(() => latest().emitRaw('keepalive', 'flows'));
    expect(onEvent).not.toHaveBeenCalled();
  });

  it('reopens the stream with back-off after the server closes it', () => {
    const onEvent = vi.fn();
    const { result } = renderHook(() => useEventStream('/s', onEvent, { EventSourceImpl: Impl, events: ['flows'], initialDelayMs: 1000 }));
    act(() => latest().open());
    act(() => latest().fail());
    expect(result.current.status).toBe('reconnecting');
    expect(result.current.reconnects).toBe(1);
    expect(FakeEventSource.instances).toHaveLength(1);
    expect(FakeEventSource.instances[0].closed).toBe(true);

    act(() => vi.advanceTimersByTime(999));
    expect(FakeEventSource.instances).toHaveLength(1);
    act(() => vi.advanceTimersByTime(1));
    expect(FakeEventSource.instances).toHaveLength(2);

    // Second failure without a successful open in between waits twice as long.
    act(() => latest().fail());
    act(() => vi.advanceTimersByTime(1999));
    expect(FakeEventSource.instances).toHaveLength(2);
    act(() => vi.advanceTimersByTime(1));
    expect(FakeEventSource.instances).toHaveLength(3);

    act(() => latest().open());
    act(() => latest().emit({ ok: true }, 'flows'));
    expect(result.current.status).toBe('open');
    expect(onEvent).toHaveBeenLastCalledWith('flows', { ok: true });
  });

  it('lets the browser retry transient drops itself', () => {
    const { result } = renderHook(() => useEventStream('/s', vi.fn(), { EventSourceImpl: Impl, events: ['flows'] }));
    act(() => latest().open());
    act(() => latest().blip());
    expect(result.current.status).toBe('reconnecting');
    act(() => vi.advanceTimersByTime(60_000));
    expect(FakeEventSource.instances).toHaveLength(1);
    act(() => latest().open());
    expect(result.current.status).toBe('open');
  });

  it('closes the stream on unmount and does not reconnect afterwards', () => {
    const { unmount } = renderHook(() => useEventStream('/s', vi.fn(), { EventSourceImpl: Impl, events: ['flows'] }));
    const es = latest();
    unmount();
    expect(es.closed).toBe(true);
    act(() => vi.advanceTimersByTime(60_000));
    expect(FakeEventSource.instances).toHaveLength(1);
  });
});
