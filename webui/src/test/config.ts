import type { GatewayConfig } from '../api/endpoints';
import { def } from '../lib/schema-check';

/** A whole config from the gateway schema's own defaults plus the three fields it requires. */
export function schemaDefaultConfig(): GatewayConfig {
  const props = def('GatewayConfig').properties ?? {};
  const defaults = Object.fromEntries(Object.entries(props).filter(([, s]) => s.default !== undefined).map(([k, s]) => [k, structuredClone(s.default)]));
  return { ...defaults, role: 'hub', interfaces: { lan: ['lan0'], satellite: 'sat0' }, served_subnets: ['10.71.1.0/24'] } as GatewayConfig;
}
