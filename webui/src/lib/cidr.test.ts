import { describe, expect, it } from 'vitest';
import { overlaps, parsePrefix } from './cidr';

describe('cidr', () => {
  it('parses IPv4 and IPv6 prefixes, and refuses what is neither', () => {
    expect(parsePrefix('10.71.1.0/24')).toEqual({ v6: false, base: 0x0a470100n, len: 24 });
    expect(parsePrefix('fd71:1::/64')?.len).toBe(64);
    expect(parsePrefix('::ffff:192.0.2.1')?.base).toBe(0xffffc0000201n);
    for (const bad of ['10.71.1/24', '10.71.1.0/33', '300.1.1.1', 'fd71::1::2/64', 'fd71:1::/129', 'x', '1.2.3.4/24/1']) expect(parsePrefix(bad)).toBeNull();
  });

  it('tells prefixes that share addresses from those that do not', () => {
    expect(overlaps('10.71.1.0/24', '10.71.1.128/25')).toBe(true);
    expect(overlaps('10.71.1.128/25', '10.71.0.0/16')).toBe(true);
    expect(overlaps('10.71.1.0/24', '10.71.2.0/24')).toBe(false);
    expect(overlaps('fd71:1::/64', 'fd71:1::10')).toBe(true);
    expect(overlaps('fd71:1::/64', 'fd71:2::/64')).toBe(false);
    expect(overlaps('10.71.1.0/24', 'fd71:1::/64')).toBe(false);
  });
});
