import { describe, expect, it } from 'vitest';
import { makeFlows } from '../lib/fake-flows';
import { applyStreamEvent, emptyLiveState } from './flow-stream';

describe('applyStreamEvent', () => {
  it('replaces the table on each `flows` snapshot (the API sends one per collector tick)', () => {
    const [a, b, c] = makeFlows(3);
    let s = applyStreamEvent(emptyLiveState, 'flows', { flows: [a, b], now: 10, seq: 1, error: null });
    expect([...s.flows.keys()]).toEqual([1, 2]);
    expect(s.now).toBe(10);
    s = applyStreamEvent(s, 'flows', { flows: [c], now: 11, seq: 2, error: null });
    expect([...s.flows.keys()]).toEqual([3]);
    expect(s.extra.seq).toBe(2);
    expect(s.updates).toBe(2);
  });

  it('merges deltas and drops closed flows', () => {
    const [a, b, c] = makeFlows(3);
    let s = applyStreamEvent(emptyLiveState, 'flows', { flows: [a, b], now: 1 });
    s = applyStreamEvent(s, 'delta', { flows: [{ ...b, bytes_down: 5 }, c], closed: [1], now: 2 });
    expect([...s.flows.keys()].sort()).toEqual([2, 3]);
    expect(s.flows.get(2)?.bytes_down).toBe(5);
  });

  it('ignores payloads that are not objects', () => {
    expect(applyStreamEvent(emptyLiveState, 'message', 'keepalive')).toBe(emptyLiveState);
  });
});
