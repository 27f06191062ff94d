import { describe, expect, it } from 'vitest';
import { makeFlows } from '../lib/fake-flows';
import { applyStreamEvent, emptyLiveState } from './flow-stream';

describe('applyStreamEvent', () => {
  it('replaces the table on each `flows` event (the API sends one per collector tick)', () => {
    const [a, b, c] = makeFlows(3);
    let s = applyStreamEvent(emptyLiveState, 'flows', { flows: [a, b], now: 10, seq: 1, error: null });
    expect([...s.flows.keys()]).toEqual([1, 2]);
    expect(s.now).toBe(10);
    s = applyStreamEvent(s, 'flows', { flows: [c], now: 11, seq: 2, error: 'gateway: timed out' });
    expect([...s.flows.keys()]).toEqual([3]);
    expect(s.error).toBe('gateway: timed out');
    expect(s.updates).toBe(2);
  });

  it('reads only the event the API sends, in its one shape', () => {
    const [a] = makeFlows(1);
    const s = applyStreamEvent(emptyLiveState, 'flows', { flows: [a], now: 1, seq: 1, error: null });
    expect(applyStreamEvent(s, 'delta', { flows: [], closed: [1], now: 2 })).toBe(s);
    expect(applyStreamEvent(s, 'flow_closed', { id: 1 })).toBe(s);
    expect(applyStreamEvent(s, 'flows', { flows: [], ts: 3 })).toBe(s); // no `now`: not the API's event
    expect(applyStreamEvent(emptyLiveState, 'message', 'keepalive')).toBe(emptyLiveState);
  });
});
