import type { FieldErrors } from '../api/errors';
import type { TrafficClass } from './config-types';
import { checkAll, checkCidr, checkName, checkPortSpec } from './validate';

/** Client-side checks of one traffic class; keys match the API's field paths inside a class. */
export function validateClass(c: TrafficClass, otherNames: string[]): FieldErrors {
  const e: FieldErrors = {};
  const name = checkName(c.name);
  if (name) e.name = name;
  else if (otherNames.includes(c.name)) e.name = `class name '${c.name}' is already used`;
  if (!Number.isInteger(c.priority) || c.priority < 0 || c.priority > 65535) e.priority = 'A whole number from 0 to 65535';
  const dports = checkAll(c.match.dports, checkPortSpec);
  if (dports) e['match.dports'] = dports;
  if (c.match.protocol === 'any' && c.match.dports.length) e['match.dports'] = 'ports need protocol tcp or udp';
  const src = checkAll(c.match.src, checkCidr);
  if (src) e['match.src'] = src;
  const dst = checkAll(c.match.dst, checkCidr);
  if (dst) e['match.dst'] = dst;
  if (c.action === 'cache' && c.match.protocol !== 'tcp') e['match.protocol'] = "action 'cache' needs protocol 'tcp'";
  return e;
}
