import { describe, expect, it } from 'vitest';
import type { Flow } from '../api/endpoints';
import { makeFlows } from './fake-flows';
import { satelliteBytes } from './flows';

function flowWith(satellite: 'client' | 'server', relayedDown: number, acked: number, received: number): Flow {
  const f = makeFlows(1)[0];
  const leg = (over: object) => ({ ...f.legs.client, ...over });
  return {
    ...f,
    bytes_down: relayedDown,
    legs: {
      satellite,
      client: leg(satellite === 'client' ? { bytes_acked: acked, bytes_received: received } : {}),
      server: leg(satellite === 'server' ? { bytes_acked: received, bytes_received: acked } : {}),
    },
  };
}

describe('satelliteBytes', () => {
  it('counts what crossed the satellite, not what the server handed over (hub: the client leg sends down)', () => {
    expect(satelliteBytes(flowWith('client', 10_000_000, 2_200_000, 500))).toEqual({ down: 2_200_000, up: 500, queuedDown: 7_800_000 });
  });

  it('at a terminal the server leg receives what came down', () => {
    expect(satelliteBytes(flowWith('server', 1_000, 1_000, 40))).toEqual({ down: 1_000, up: 40, queuedDown: 0 });
  });
});
