// A hub's config version for one managed terminal: named config sections, each replacing the terminal's own.
// Checked here against the gateway's config schema (what a schema can say); the API checks the rest against
// what the terminal runs.
import { MANAGED_SECTIONS } from '../api/managed';
import { check, field } from './schema-check';

export type Sections = Record<string, unknown>;

export type Parsed = { ok: true; sections: Sections } | { ok: false; errors: string[] };

export function isManagedSection(name: string): boolean {
  return (MANAGED_SECTIONS as readonly string[]).includes(name);
}

/** The sections typed as a JSON object, or what is wrong with them (each problem with its path). */
export function parseSections(text: string): Parsed {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { ok: false, errors: [`not JSON: ${e instanceof Error ? e.message : String(e)}`] };
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) return { ok: false, errors: ['a JSON object of sections, e.g. {"quic": "pass"}'] };
  const sections = value as Sections;
  const names = Object.keys(sections);
  if (!names.length) return { ok: false, errors: ['at least one section'] };
  const errors: string[] = [];
  for (const name of names) {
    if (!isManagedSection(name)) {
      errors.push(`${name}: not a section the hub sets (${MANAGED_SECTIONS.join(', ')})`);
      continue;
    }
    for (const [path, msg] of Object.entries(check(field('GatewayConfig', name), sections[name]))) errors.push(`${path ? `${name}.${path}` : name}: ${msg}`);
  }
  return errors.length ? { ok: false, errors } : { ok: true, sections };
}

/** A section as the gateway's schema has it by default: a starting point, not what the terminal runs. */
export function sectionDefault(name: string): unknown {
  return structuredClone(field('GatewayConfig', name).default);
}

/** `sections` with `name` set to `value`, as the editor's text (the text kept when it does not parse). */
export function withSection(text: string, name: string, value: unknown): string {
  let current: Sections = {};
  try {
    const v: unknown = JSON.parse(text || '{}');
    if (v && typeof v === 'object' && !Array.isArray(v)) current = v as Sections;
    else return text;
  } catch {
    return text;
  }
  return JSON.stringify({ ...current, [name]: value }, null, 2);
}
