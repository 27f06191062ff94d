// Traffic classes as the forms edit them: the generated TrafficClass type, filled with the gateway's defaults.
import type { TrafficClass } from '../api/endpoints';
import { defaultOf } from './schema-check';

/** A new class: every field at the gateway's default (the schema's), the given priority. */
export function newTrafficClass(priority: number): TrafficClass {
  return {
    name: '',
    priority,
    match: { ...defaultOf<TrafficClass['match']>('TrafficClass', 'match') },
    action: 'accelerate',
    satellite: { congestion_control: null, ...defaultOf<TrafficClass['satellite']>('TrafficClass', 'satellite') },
  };
}

type LooseClass = Pick<TrafficClass, 'name' | 'priority' | 'action'> & {
  match?: Partial<TrafficClass['match']>;
  satellite?: Partial<TrafficClass['satellite']>;
};

/** Fills the defaults the API may omit, so forms always edit complete classes. */
export function normaliseClass(c: LooseClass): TrafficClass {
  const blank = newTrafficClass(c.priority);
  return {
    name: c.name,
    priority: c.priority,
    action: c.action,
    match: { ...blank.match, ...(c.match ?? {}) },
    satellite: { ...blank.satellite, ...(c.satellite ?? {}) },
  };
}
