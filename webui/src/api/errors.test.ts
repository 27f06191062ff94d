import { describe, expect, it } from 'vitest';
import { normaliseField, parseApiError } from './errors';

describe('parseApiError', () => {
  it('reads Perigee error objects with a field path', () => {
    const e = parseApiError(422, { error: { code: 'invalid_port', message: 'bad port', field: '$.classes[2].match.dports[0]' } });
    expect(e.code).toBe('invalid_port');
    expect(e.fieldErrors).toEqual({ 'classes.2.match.dports.0': 'bad port' });
  });

  it('reads the API validation_error with per-field details', () => {
    const e = parseApiError(422, {
      error: {
        code: 'validation_error',
        message: 'body.classes.0.match.dports.0: bad port',
        field: 'body.classes.0.match.dports.0',
        details: [
          { field: 'body.classes.0.match.dports.0', message: 'bad port', type: 'value_error' },
          { field: 'body.classes.1.name', message: 'bad name', type: 'string_pattern_mismatch' },
        ],
      },
    });
    expect(e.code).toBe('validation_error');
    expect(e.fieldErrors).toEqual({ 'classes.0.match.dports.0': 'bad port', 'classes.1.name': 'bad name' });
  });

  it('reads pydantic validation lists and joins messages per field', () => {
    const e = parseApiError(422, {
      detail: [
        { loc: ['body', 'classes', 0, 'name'], msg: 'bad name' },
        { loc: ['body', 'classes', 0, 'name'], msg: 'too long' },
        { loc: ['body', 'bypass', 5, 'cidrs', 0], msg: 'not a CIDR' },
      ],
    });
    expect(e.fieldErrors).toEqual({ 'classes.0.name': 'bad name; too long', 'bypass.5.cidrs.0': 'not a CIDR' });
    expect(e.message).toContain('bad name');
  });

  it('falls back to the HTTP status for unknown bodies', () => {
    expect(parseApiError(502, 'oops').message).toBe('Request failed (HTTP 502)');
    expect(normaliseField('/a/0/b')).toBe('a.0.b');
  });
});
