// The box's basic settings as forms edit them: text fields to config values and back, the checks the
// gateway's schema makes (src/lib/schema-check.ts), and the config the first-login wizard builds.
import type { FieldErrors } from '../api/errors';
import type { GatewayConfig, NetInterface, RunningOut } from '../api/endpoints';
import { gatewayReportEnums } from '../api/gateway-schema.gen';
import { checkDef, def } from './schema-check';

export type Route = GatewayConfig['satellite']['routes'][number];

/** One entry per line (commas also separate); blanks dropped. */
export function parseList(text: string): string[] {
  return text
    .split(/[\n,]/)
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

export function formatList(items: readonly string[]): string {
  return items.join('\n');
}

/** Routes typed one per line as "DST via NEXT-HOP"; a line in another form is an error naming it. */
export function parseRoutes(text: string): { routes: Route[]; error?: string } {
  const routes: Route[] = [];
  for (const line of text.split('\n').map((l) => l.trim())) {
    if (line === '') continue;
    const m = /^(\S+)\s+via\s+(\S+)$/.exec(line);
    if (!m) return { routes, error: `'${line}': write a route as "198.51.100.0/24 via 203.0.113.2"` };
    routes.push({ dst: m[1], via: m[2] });
  }
  return { routes };
}

export function formatRoutes(routes: readonly Route[]): string {
  return routes.map((r) => `${r.dst} via ${r.via}`).join('\n');
}

/** Everything the gateway's schema finds wrong with a whole config, by field path ("splitter.max_flows"). */
export function checkConfig(cfg: GatewayConfig): FieldErrors {
  return checkDef('GatewayConfig', cfg);
}

/** The errors of the given sections only (a step of the wizard, one settings form). */
export function errorsUnder(errors: FieldErrors, prefixes: readonly string[]): FieldErrors {
  return Object.fromEntries(Object.entries(errors).filter(([k]) => prefixes.some((p) => k === p || k.startsWith(`${p}.`))));
}

/** The values a schema enum allows ("CongestionControl", "Store", "Role"). */
export function choices(defName: string): string[] {
  return (def(defName).enum ?? []).map(String);
}

/** The values an enum of the gateway's reports allows ("FlowState", "CcReason"). */
export function reportChoices(name: string): string[] {
  const values = gatewayReportEnums[name];
  if (!values) throw new Error(`the gateway's reports schema has no enum ${name}`);
  return [...values];
}

/** "sat0 — 203.0.113.1/30 · up": what an interface picker shows. */
export function describeInterface(i: NetInterface): string {
  const addrs = i.addresses.filter((a) => !a.startsWith('fe80:')).slice(0, 2);
  const state = i.oper_state === 'unknown' && i.running ? 'running' : i.oper_state;
  return `${i.name}${addrs.length ? ` — ${addrs.join(', ')}` : ' — no address'} · ${state}`;
}

/** Interfaces a split can use: every one but loopback. */
export function usableInterfaces(list: readonly NetInterface[]): NetInterface[] {
  return list.filter((i) => !i.loopback);
}

/** A new box, as the API judges it: the gateway runs no config, or the factory config unchanged (it serves nobody). */
export function setupNeeded(running: RunningOut | undefined): boolean {
  return running?.needs_setup === true;
}

/**
 * Where the wizard starts: the API's proposal (built-in bypass rules, defaults) without what only this box
 * can say: interfaces it does not have, and the networks (served subnets, routes), which the operator types.
 */
export function wizardStart(base: GatewayConfig, interfaces: readonly NetInterface[]): GatewayConfig {
  const here = new Set(usableInterfaces(interfaces).map((i) => i.name));
  return {
    ...base,
    interfaces: {
      lan: base.interfaces.lan.filter((n) => here.has(n)),
      satellite: here.has(base.interfaces.satellite) ? base.interfaces.satellite : '',
    },
    served_subnets: [],
    satellite: { ...base.satellite, routes: [] },
  };
}

/**
 * The gateway's rule the schema cannot say (its validate_dns): with its own resolver off, the cache needs the
 * resolvers Squid asks. The wizard's cache step says so before the server refuses the whole config.
 */
export function cacheResolverError(cfg: GatewayConfig): string | undefined {
  if (!cfg.cache.enabled || cfg.dns.enabled || cfg.dns.upstream.length > 0) return undefined;
  return 'The cache needs a resolver: list the DNS resolver(s) Squid should ask';
}

/** The fields each wizard step sets: a step is done when the schema finds nothing under them. */
export const WIZARD_STEPS = [
  { label: 'Role', fields: ['role'] },
  { label: 'Interfaces', fields: ['interfaces'] },
  { label: 'Networks', fields: ['served_subnets', 'satellite.routes'] },
  { label: 'Satellite leg and cache', fields: ['satellite.congestion_control', 'satellite.forward_rate_bps', 'satellite.return_rate_bps', 'terrestrial', 'cache', 'dns.upstream'] },
  { label: 'Review and apply', fields: [] },
] as const;
