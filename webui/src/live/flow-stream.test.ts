import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { makeFlows } from '../lib/fake-flows';
import { applyStreamEvent, emptyLiveState, FLOWS_EVENT, FLOWS_EVENT_FIELDS } from './flow-stream';

/** The API's FlowsEvent model as its OpenAPI document (api/openapi.json, what the client is generated from) has it. */
function apiModel(): { properties: Record<string, unknown>; 'x-sse-event': string } {
  const doc = JSON.parse(readFileSync(resolve(__dirname, '../../../api/openapi.json'), 'utf8'));
  return doc.components.schemas.FlowsEvent;
}

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
    expect(applyStreamEvent(s, 'flows', { flows: [], now: 2, seq: 2 })).toBe(s); // no `error`
    expect(applyStreamEvent(s, 'flows', { flows: [], now: 2, seq: 2, error: null, closed: [1] })).toBe(s); // a field the model has not
    expect(applyStreamEvent(s, 'flows', { flows: [], now: 2, seq: '2', error: null })).toBe(s);
    expect(applyStreamEvent(emptyLiveState, 'message', 'keepalive')).toBe(emptyLiveState);
  });

  it("listens for the event the API's model names, with exactly its fields", () => {
    const model = apiModel();
    expect(FLOWS_EVENT).toBe(model['x-sse-event']);
    expect([...FLOWS_EVENT_FIELDS].sort()).toEqual(Object.keys(model.properties).sort());
  });
});
