import type { FieldErrors } from '../api/errors';

/** The error for exactly this field path, or for any element inside it (e.g. "dports.1" under "dports"). */
export function errorFor(errors: FieldErrors | undefined, path: string): string | undefined {
  if (!errors) return undefined;
  if (errors[path]) return errors[path];
  const nested = Object.entries(errors).filter(([k]) => k.startsWith(`${path}.`));
  if (nested.length === 0) return undefined;
  return nested.map(([, v]) => v).join('; ');
}

/** The errors under a prefix, with the prefix removed: scope(errors, "classes.2") feeds one class's form. */
export function scope(errors: FieldErrors | undefined, prefix: string): FieldErrors {
  const out: FieldErrors = {};
  if (!errors) return out;
  for (const [k, v] of Object.entries(errors)) {
    if (k === prefix) out._ = out._ ? `${out._}; ${v}` : v;
    else if (k.startsWith(`${prefix}.`)) out[k.slice(prefix.length + 1)] = v;
  }
  return out;
}
