// Client-side checks mirroring the API's rules, so most mistakes show before a round trip.
// The API stays the authority: its 422 answers are shown field by field too.
export const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;

export function checkName(v: string): string | undefined {
  return NAME_RE.test(v) ? undefined : 'Letters, digits, "_", "." and "-", starting with a letter or digit (max 63)';
}

export function checkPortSpec(v: string): string | undefined {
  const m = /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(v);
  if (!m) return `'${v}' is not a port or an inclusive range like '1000-2000'`;
  const lo = Number(m[1]);
  const hi = m[2] ? Number(m[2]) : lo;
  if (lo < 1 || hi > 65535 || hi < 1 || lo > 65535) return `'${v}': ports must be within 1-65535`;
  if (lo > hi) return `'${v}': range start is above its end`;
  return undefined;
}

const V4 = /^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}$/;

export function checkCidr(v: string): string | undefined {
  const [addr, len, extra] = v.split('/');
  if (extra !== undefined) return `'${v}' is not an IPv4 or IPv6 address or CIDR`;
  const isV4 = V4.test(addr);
  const isV6 = !isV4 && /^[0-9a-fA-F:.]+$/.test(addr) && addr.includes(':') && (addr.match(/::/g) ?? []).length <= 1;
  if (!isV4 && !isV6) return `'${v}' is not an IPv4 or IPv6 address or CIDR`;
  if (len !== undefined) {
    const n = Number(len);
    if (!/^\d{1,3}$/.test(len) || n > (isV4 ? 32 : 128)) return `'${v}': prefix length must be 0-${isV4 ? 32 : 128}`;
  }
  return undefined;
}

export function checkAll(values: string[], check: (v: string) => string | undefined): string | undefined {
  for (const v of values) {
    const e = check(v);
    if (e) return e;
  }
  return undefined;
}
