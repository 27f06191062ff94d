// Field checks from the gateway's own config schema (src/api/gateway-schema.gen.ts, generated from the
// gateway's Rust types): the types, bounds, lengths, patterns and allowed values every form field has.
// What a schema cannot say (a range whose start is above its end, an IPv4-mapped prefix, rules between
// fields) the API's validation and the gateway's dry run answer, shown under the field they name.
import { gatewayConfigSchema } from '../api/gateway-schema.gen';
import type { FieldErrors } from '../api/errors';

/** The part of JSON Schema (2020-12) the gateway's schema uses. */
export interface JsonSchema {
  $ref?: string;
  $defs?: Record<string, JsonSchema>;
  type?: string | string[];
  enum?: readonly unknown[];
  const?: unknown;
  anyOf?: readonly JsonSchema[];
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  maxItems?: number;
  items?: JsonSchema;
  properties?: Record<string, JsonSchema>;
  required?: readonly string[];
  additionalProperties?: boolean | JsonSchema;
  propertyNames?: JsonSchema;
  description?: string;
  default?: unknown;
  [extension: string]: unknown;
}

const root = gatewayConfigSchema;
const patterns = new Map<string, RegExp>();

function regex(p: string): RegExp {
  let r = patterns.get(p);
  if (!r) {
    r = new RegExp(p);
    patterns.set(p, r);
  }
  return r;
}

/** A named definition of the config schema ("TrafficClass", "Cidr", ...); the root is "GatewayConfig". */
export function def(name: string): JsonSchema {
  if (name === 'GatewayConfig') return root;
  const d = root.$defs?.[name];
  if (!d) throw new Error(`the gateway's config schema has no definition ${name}`);
  return d;
}

/** A `$ref` replaced by its definition; the referring schema's own keywords (its description) win. */
function resolve(s: JsonSchema): JsonSchema {
  if (!s.$ref) return s;
  const merged: JsonSchema = { ...def(s.$ref.replace('#/$defs/', '')), ...s };
  delete merged.$ref;
  return merged;
}

/** The schema of a field: `field('Splitter', 'max_flows')`, `field('GatewayConfig', 'cache.memory_mb')`. */
export function field(defName: string, path: string): JsonSchema {
  let s = resolve(def(defName));
  for (const part of path.split('.')) {
    const next = /^\d+$/.test(part) ? s.items : s.properties?.[part];
    if (!next) throw new Error(`${defName}.${path}: no such field in the gateway's config schema`);
    s = resolve(next);
  }
  return s;
}

function typeOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

function typeMatches(want: string, v: unknown): boolean {
  const t = typeOf(v);
  return want === t || (want === 'number' && t === 'integer');
}

/** Whatever is wrong with `value` under schema `s`, keyed by path below it ("" for the value itself). */
export function check(s: JsonSchema, value: unknown, path = '', out: FieldErrors = {}): FieldErrors {
  const schema = resolve(s);
  const at = (p: string) => (path ? `${path}.${p}` : p);
  const fail = (msg: string) => {
    if (!(path in out)) out[path] = msg;
    return out;
  };
  if (schema.anyOf) {
    const fits = schema.anyOf.some((alt) => Object.keys(check(alt, value)).length === 0);
    return fits ? out : fail(describeChoices(schema.anyOf));
  }
  if (schema.const !== undefined && value !== schema.const) return fail(`must be ${JSON.stringify(schema.const)}`);
  if (schema.enum && !schema.enum.includes(value)) return fail(`must be one of ${schema.enum.map(String).join(', ')}`);
  const types = schema.type === undefined ? [] : Array.isArray(schema.type) ? schema.type : [schema.type];
  if (types.length && !types.some((t) => typeMatches(t, value))) {
    return fail(types.includes('integer') ? 'must be a whole number' : `must be ${types.filter((t) => t !== 'null').join(' or ')}`);
  }
  if (typeof value === 'number') {
    if (schema.minimum !== undefined && value < schema.minimum) return fail(`must be at least ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) return fail(`must be at most ${schema.maximum}`);
    // The gateway's keyword for "0 (none), or at least": e.g. an enabled shaper's lowest rate.
    const lowest = schema['x-minimum-nonzero'];
    if (typeof lowest === 'number' && value !== 0 && value < lowest) return fail(`must be 0 (none) or at least ${lowest}`);
  }
  if (typeof value === 'string') {
    const n = [...value].length;
    if (schema.minLength !== undefined && n < schema.minLength) return fail(value === '' ? 'required' : `at least ${schema.minLength} characters`);
    if (schema.maxLength !== undefined && n > schema.maxLength) return fail(`at most ${schema.maxLength} characters`);
    if (schema.pattern && !regex(schema.pattern).test(value)) {
      return fail(`'${value}' is not ${schema.description ? `valid: ${schema.description}` : 'in the expected form'}`);
    }
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) return fail(`at least ${schema.minItems} needed`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) return fail(`at most ${schema.maxItems} entries`);
    if (schema.items) value.forEach((v, i) => check(schema.items as JsonSchema, v, at(String(i)), out));
  }
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    const obj = value as Record<string, unknown>;
    for (const k of schema.required ?? []) if (!(k in obj) || obj[k] === undefined) out[at(k)] ??= 'required';
    for (const [k, v] of Object.entries(obj)) {
      if (v === undefined) continue;
      const prop = schema.properties?.[k];
      if (prop) check(prop, v, at(k), out);
      else if (schema.additionalProperties === false) out[at(k)] ??= 'not a field the gateway knows';
      else if (schema.propertyNames?.enum && !schema.propertyNames.enum.includes(k)) out[at(k)] ??= `'${k}' is not allowed here`;
      else if (typeof schema.additionalProperties === 'object') check(schema.additionalProperties, v, at(k), out);
    }
  }
  return out;
}

function describeChoices(alts: readonly JsonSchema[]): string {
  const values = alts.flatMap((a) => {
    const r = resolve(a);
    return r.enum ? r.enum.map(String) : r.const !== undefined ? [r.const === '' ? '(empty)' : String(r.const)] : [];
  });
  return values.length ? `must be one of ${values.join(', ')}` : 'not an accepted value';
}

/** `check` against a named definition. */
export function checkDef(defName: string, value: unknown): FieldErrors {
  return check(def(defName), value);
}

/** One field's problem, or undefined: for a form input. */
export function checkField(defName: string, path: string, value: unknown): string | undefined {
  const errs = check(field(defName, path), value);
  const first = Object.entries(errs)[0];
  return first ? first[1] : undefined;
}

/** A field's bounds for a number input. */
export function bounds(defName: string, path: string): { min?: number; max?: number } {
  const s = field(defName, path);
  return { min: s.minimum, max: s.maximum };
}

/** A field's default as the gateway has it. */
export function defaultOf<T>(defName: string, path: string): T {
  return field(defName, path).default as T;
}
