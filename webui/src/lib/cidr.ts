// Prefixes as numbers, to tell whether two of them share addresses (a site's prefixes against a terminal's).

interface Net {
  v6: boolean;
  base: bigint;
  len: number;
}

function v4(text: string): bigint | null {
  const parts = text.split('.');
  if (parts.length !== 4 || parts.some((p) => !/^\d{1,3}$/.test(p) || Number(p) > 255)) return null;
  return parts.reduce((acc, p) => (acc << 8n) | BigInt(Number(p)), 0n);
}

function v6(text: string): bigint | null {
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const groups = (s: string) => (s ? s.split(':') : []);
  const head = groups(halves[0]);
  const tail = halves.length === 2 ? groups(halves[1]) : [];
  // An embedded IPv4 tail (::ffff:192.0.2.1) counts as two groups.
  const last = tail.length ? tail : head;
  if (last.length && last[last.length - 1].includes('.')) {
    const four = v4(last.pop() as string);
    if (four == null) return null;
    last.push(((four >> 16n) & 0xffffn).toString(16), (four & 0xffffn).toString(16));
  }
  const missing = 8 - head.length - tail.length;
  if ((halves.length === 1 && missing !== 0) || missing < 0) return null;
  const all = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill('0'), ...tail];
  if (all.some((g) => !/^[0-9a-fA-F]{1,4}$/.test(g))) return null;
  return all.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n);
}

/** `192.0.2.0/24`, `fd71:1::/64` or a bare address; null when it is neither. */
export function parsePrefix(text: string): Net | null {
  const [addr, lenText, ...rest] = text.trim().split('/');
  if (rest.length) return null;
  const isV6 = addr.includes(':');
  const base = isV6 ? v6(addr) : v4(addr);
  const bits = isV6 ? 128 : 32;
  const len = lenText === undefined ? bits : /^\d{1,3}$/.test(lenText) ? Number(lenText) : NaN;
  if (base == null || !(len >= 0 && len <= bits)) return null;
  return { v6: isV6, base, len };
}

function masked(n: Net, len: number): bigint {
  const bits = n.v6 ? 128 : 32;
  return n.base >> BigInt(bits - len);
}

/** Whether two prefixes share an address (one holds the other). */
export function overlaps(a: string, b: string): boolean {
  const x = parsePrefix(a);
  const y = parsePrefix(b);
  if (!x || !y || x.v6 !== y.v6) return false;
  const len = Math.min(x.len, y.len);
  return masked(x, len) === masked(y, len);
}
