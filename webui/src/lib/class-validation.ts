import type { FieldErrors } from '../api/errors';
import type { TrafficClass } from '../api/endpoints';
import { checkDef } from './schema-check';

/** Client-side checks of one traffic class, from the gateway's schema; keys match the API's field paths
 * inside a class ("match.dports.1"). Rules between fields are the API's to answer. */
export function validateClass(c: TrafficClass, otherNames: string[]): FieldErrors {
  const e = checkDef('TrafficClass', c);
  if (!e.name && otherNames.includes(c.name)) e.name = `class name '${c.name}' is already used`;
  return e;
}
