import { describe, expect, it } from 'vitest';
import type { GatewayConfig, NetInterface, RunningOut } from '../api/endpoints';
import { schemaDefaultConfig } from '../test/config';
import { checkConfig, choices, describeInterface, errorsUnder, parseList, parseRoutes, setupNeeded, wizardStart } from './system-config';

function nic(name: string, addresses: string[], extra: Partial<NetInterface> = {}): NetInterface {
  return { name, addresses, oper_state: 'up', up: true, running: true, loopback: false, mtu: 1500, mac: null, configured_as: null, ...extra };
}

describe('system config', () => {
  it('parses lists and routes as typed, naming a line it cannot read', () => {
    expect(parseList('10.71.1.0/24\n\n fd71:1::/64 ,10.9.0.0/16')).toEqual(['10.71.1.0/24', 'fd71:1::/64', '10.9.0.0/16']);
    expect(parseRoutes('10.71.3.0/24 via 10.71.2.2\n\nfd71:3::/64  via  fd71:2::2')).toEqual({
      routes: [
        { dst: '10.71.3.0/24', via: '10.71.2.2' },
        { dst: 'fd71:3::/64', via: 'fd71:2::2' },
      ],
    });
    expect(parseRoutes('10.71.3.0/24 10.71.2.2').error).toMatch(/'10.71.3.0\/24 10.71.2.2': write a route as/);
  });

  it("checks a whole config with the gateway's schema, by field path", () => {
    const ok = schemaDefaultConfig();
    expect(checkConfig(ok)).toEqual({});
    const bad = { ...ok, splitter: { ...ok.splitter, max_flows: 0 }, cache: { ...ok.cache, store: 'ufs' }, interfaces: { lan: [], satellite: 'a/b' } } as unknown as GatewayConfig;
    const errors = checkConfig(bad);
    expect(Object.keys(errors).sort()).toEqual(['cache.store', 'interfaces.lan', 'interfaces.satellite', 'splitter.max_flows']);
    expect(errors['splitter.max_flows']).toBe('must be at least 1');
    expect(Object.keys(errorsUnder(errors, ['interfaces']))).toEqual(['interfaces.lan', 'interfaces.satellite']);
    // The interface name bound is the gateway's (15), not a copy's.
    expect(checkConfig({ ...ok, interfaces: { lan: ['x'.repeat(16)], satellite: 'sat0' } })).toHaveProperty(['interfaces.lan.0']);
  });

  it('offers the congestion controls and stores the schema names', () => {
    expect(choices('CongestionControl')).toEqual(expect.arrayContaining(['hybla', 'cubic', 'bbr']));
    expect(choices('Store')).toEqual(['rock', 'aufs']);
  });

  it('starts the wizard from the proposal without networks or interfaces the box lacks', () => {
    const base = { ...schemaDefaultConfig(), interfaces: { lan: ['lan0', 'eth7'], satellite: 'sat9' } };
    const start = wizardStart(base, [nic('lo', ['127.0.0.1/8'], { loopback: true }), nic('lan0', []), nic('sat0', [])]);
    expect(start.interfaces).toEqual({ lan: ['lan0'], satellite: '' });
    expect(start.served_subnets).toEqual([]);
    expect(start.satellite.routes).toEqual([]);
    expect(start.bypass).toEqual(base.bypass);
  });

  it('says when a box needs setting up and describes interfaces plainly', () => {
    // The API judges it (no config, or the factory config unchanged): the revision alone says nothing.
    const running = { reachable: true, revision: 'factory-default', needs_setup: true } as RunningOut;
    expect(setupNeeded(running)).toBe(true);
    expect(setupNeeded({ ...running, needs_setup: false })).toBe(false);
    expect(setupNeeded(undefined)).toBe(false);
    expect(describeInterface(nic('sat0', ['10.71.2.1/30', 'fe80::1/64']))).toBe('sat0 — 10.71.2.1/30 · up');
    expect(describeInterface(nic('veth1', [], { oper_state: 'unknown' }))).toBe('veth1 — no address · running');
  });
});
