// What the gateway's schema says about bypass entries beyond their types, read from it (never restated).
import { def } from './schema-check';

function portProtocols(): readonly string[] {
  const listed = def('BypassRule').properties?.ports?.['x-protocols'];
  if (!Array.isArray(listed)) throw new Error("the gateway's config schema does not say which bypass protocols take ports");
  return listed.map(String);
}

/** The bypass protocols whose entries may list ports (`x-protocols` on BypassRule.ports). */
export const PORT_PROTOCOLS = portProtocols();

/** Whether an entry of this protocol may list ports. */
export function takesPorts(protocol: string): boolean {
  return PORT_PROTOCOLS.includes(protocol);
}
