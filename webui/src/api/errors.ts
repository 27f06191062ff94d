// One error type for every API failure, whatever shape the server used:
//   {"error": {"code", "message", "field"}}      (Perigee's own errors, also passed through from the gateway)
//   {"detail": [{"loc": [...], "msg", "type"}]}   (FastAPI/pydantic 422 validation)
//   {"detail": "text"} or {"detail": {"code", "message"}}
export type FieldErrors = Record<string, string>;

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly fieldErrors: FieldErrors;
  /** The error's machine-readable extras (e.g. {"issues": [...]} for policy conflicts). */
  readonly details: unknown;

  constructor(status: number, code: string, message: string, fieldErrors: FieldErrors = {}, details: unknown = null) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.fieldErrors = fieldErrors;
    this.details = details;
  }
}

type Loc = (string | number)[];

/** Turns a pydantic location like ["body","classes",0,"match","dports",1] into "classes.0.match.dports.1". */
export function locToPath(loc: Loc): string {
  const parts = loc[0] === 'body' || loc[0] === 'query' || loc[0] === 'path' ? loc.slice(1) : loc;
  return parts.map(String).join('.');
}

/** Normalises a JSON path like "$.classes[0].name" or "/classes/0/name" to "classes.0.name". */
export function normaliseField(field: string): string {
  return field
    .replace(/^\$\.?/, '')
    .replace(/^\//, '')
    .replace(/\[(\d+)\]/g, '.$1')
    .replace(/\//g, '.')
    .replace(/^\./, '')
    .replace(/^(body|query|path)(\.|$)/, '');
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function parseApiError(status: number, body: unknown): ApiError {
  const fallback = `Request failed (HTTP ${status})`;
  if (isObject(body)) {
    const err = body.error;
    if (isObject(err)) {
      const fields: FieldErrors = {};
      const message = typeof err.message === 'string' ? err.message : fallback;
      // A validation error lists every field in details; otherwise the one field named carries the message.
      if (!Array.isArray(err.details) && typeof err.field === 'string' && err.field) fields[normaliseField(err.field)] = message;
      if (Array.isArray(err.details)) collectPydantic(err.details, fields);
      return new ApiError(status, typeof err.code === 'string' ? err.code : `http_${status}`, message, fields, err.details ?? null);
    }
    const detail = body.detail;
    if (Array.isArray(detail)) {
      const fields: FieldErrors = {};
      collectPydantic(detail, fields);
      const first = Object.values(fields)[0];
      return new ApiError(status, 'validation_error', first ? `Invalid input: ${first}` : fallback, fields);
    }
    if (typeof detail === 'string') return new ApiError(status, detail.replace(/\s+/g, '_').toLowerCase(), detail);
    if (isObject(detail)) {
      const code = typeof detail.code === 'string' ? detail.code : `http_${status}`;
      const message = typeof detail.message === 'string' ? detail.message : code;
      const fields: FieldErrors = {};
      if (typeof detail.field === 'string' && detail.field) fields[normaliseField(detail.field)] = message;
      return new ApiError(status, code, message, fields);
    }
  }
  return new ApiError(status, `http_${status}`, fallback);
}

function collectPydantic(items: unknown[], into: FieldErrors): void {
  for (const item of items) {
    if (!isObject(item)) continue;
    const msg = typeof item.msg === 'string' ? item.msg : typeof item.message === 'string' ? item.message : 'invalid';
    let path = '';
    if (Array.isArray(item.loc)) path = locToPath(item.loc as Loc);
    else if (typeof item.field === 'string') path = normaliseField(item.field);
    const key = path || '_';
    into[key] = into[key] ? `${into[key]}; ${msg}` : msg;
  }
}

export function errorMessage(e: unknown): string {
  if (e instanceof ApiError) return e.message;
  if (e instanceof Error) return e.message;
  return String(e);
}
