import { describe, expect, it } from 'vitest';
import type { Flow } from '../api/endpoints';
import { makeFlows } from './fake-flows';
import { CC_REASON, formatRetransmit, PATH_CHOICES, PATH_LABEL, RELAY_LABEL, retransmitBetween, satelliteBytes } from './flows';
import { reportChoices } from './system-config';

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

describe('the satellite leg', () => {
  it('has a badge and a meaning for every reason the gateway reports', () => {
    expect(Object.keys(CC_REASON).sort()).toEqual(reportChoices('CcReason').sort());
  });

  it("labels every path and relay the gateway reports, and filters by the gateway's paths", () => {
    expect(Object.keys(PATH_LABEL).sort()).toEqual(reportChoices('FlowPath').sort());
    expect(Object.keys(RELAY_LABEL).sort()).toEqual(reportChoices('Relay').sort());
    expect(PATH_CHOICES.map((c) => c.value)).toEqual(reportChoices('FlowPath'));
  });

  it('rates the retransmissions between two samples, not since the flow began', () => {
    expect(retransmitBetween({ segments_sent: 1000, segments_retransmitted: 10 }, { segments_sent: 1200, segments_retransmitted: 20 })).toBe(5);
    expect(retransmitBetween({ segments_sent: 1000, segments_retransmitted: 10 }, { segments_sent: 1000, segments_retransmitted: 10 })).toBeNull();
    expect(retransmitBetween(null, { segments_sent: 10, segments_retransmitted: 1 })).toBeNull();
    expect(retransmitBetween({ segments_sent: 10, segments_retransmitted: 5 }, { segments_sent: 20, segments_retransmitted: 1 })).toBeNull();
  });

  it('formats a share, and nothing sent as a dash', () => {
    expect(formatRetransmit(1.23456)).toBe('1.23 %');
    expect(formatRetransmit(12.345)).toBe('12.3 %');
    expect(formatRetransmit(0, 0)).toBe('—');
    expect(formatRetransmit(null)).toBe('—');
  });
});
