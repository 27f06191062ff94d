import { describe, expect, it } from 'vitest';
import { bounds, checkDef, checkField, defaultOf, field } from './schema-check';

// These read the gateway's own schema (generated from its Rust types): what they accept is what the gateway
// accepts, as far as a JSON Schema can say it.
describe('schema-check', () => {
  it('takes names up to the 64 characters the gateway allows', () => {
    expect(checkField('TrafficClass', 'name', 'a'.repeat(64))).toBeUndefined();
    expect(checkField('TrafficClass', 'name', 'a'.repeat(65))).toMatch(/at most 64/);
    expect(checkField('TrafficClass', 'name', '-web')).toMatch(/not valid/);
  });

  it('knows every bypass protocol, icmp included', () => {
    expect(field('BypassRule', 'protocol').enum).toEqual(['tcp', 'udp', 'esp', 'ah', 'icmp', 'any']);
    expect(checkField('BypassRule', 'protocol', 'icmp')).toBeUndefined();
    expect(checkField('BypassRule', 'protocol', 'gre')).toMatch(/one of/);
  });

  it('checks CIDRs and port ranges by the gateway patterns', () => {
    for (const ok of ['10.0.0.0/8', 'fd71:1::/64', '10.71.9.1', '10.0.0.0/024']) expect(checkField('Match', 'src', [ok])).toBeUndefined();
    for (const bad of ['10.0.0.0/+24', '10.0.0.0/33', '010.1.1.1', 'fe80::1%lan0', 'fd71::1::/64']) {
      expect(checkField('Match', 'src', [bad]), bad).toMatch(/not valid/);
    }
    for (const ok of ['80', '00080', '8000-8080', '65535']) expect(checkField('Match', 'dports', [ok])).toBeUndefined();
    for (const bad of ['0', '65536', '+80', '000080', '80-']) expect(checkField('Match', 'dports', [bad]), bad).toBeTruthy();
  });

  it('gives bounds, defaults and whole-object errors by path', () => {
    expect(bounds('Splitter', 'max_flows')).toEqual({ min: 1, max: 1_000_000 });
    expect(defaultOf('GatewayConfig', 'quic')).toBe('fallback');
    const errs = checkDef('TrafficClass', {
      name: 'web',
      priority: 70_000,
      action: 'cache',
      match: { dports: ['80', 'x'], bogus: 1 },
      satellite: { congestion_control: 'vegas' },
    });
    expect(Object.keys(errs).sort()).toEqual(['match.bogus', 'match.dports.1', 'priority', 'satellite.congestion_control']);
  });

  it('takes the system default or a known name for the terrestrial leg', () => {
    expect(checkField('Terrestrial', 'congestion_control', '')).toBeUndefined();
    expect(checkField('Terrestrial', 'congestion_control', 'cubic')).toBeUndefined();
    expect(checkField('Terrestrial', 'congestion_control', 'vegas')).toMatch(/one of/);
  });

  it("takes a shaper's rate as 0 (none) or at least the gateway's lowest, from its schema", () => {
    const lowest = field('Shaping', 'rate_bps')['x-minimum-nonzero'] as number;
    expect(lowest).toBeGreaterThan(0);
    expect(checkField('Shaping', 'rate_bps', 0)).toBeUndefined();
    expect(checkField('Shaping', 'rate_bps', lowest)).toBeUndefined();
    expect(checkField('Shaping', 'rate_bps', lowest - 1)).toBe(`must be 0 (none) or at least ${lowest}`);
  });
});
