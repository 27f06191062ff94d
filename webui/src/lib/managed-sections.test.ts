import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MANAGED_SECTIONS } from '../api/managed';
import { parseSections, sectionDefault, withSection } from './managed-sections';

describe('managed sections', () => {
  // vitest runs in webui/ (npm --prefix webui test, make -C webui).
  it('are the ones the API takes (its OpenAPI names them)', () => {
    const openapi = JSON.parse(readFileSync(join(process.cwd(), '..', 'api', 'openapi.json'), 'utf8'));
    const description: string = openapi.components.schemas.ManagedVersionIn.properties.sections.description;
    expect(description.split(': ').pop()?.split(', ')).toEqual([...MANAGED_SECTIONS]);
  });

  it('parses a JSON object of sections, naming every problem with its path', () => {
    expect(parseSections('{"quic": "pass", "hybla": {"rtt0_ms": 30}}')).toEqual({ ok: true, sections: { quic: 'pass', hybla: { rtt0_ms: 30 } } });
    expect(parseSections('{')).toMatchObject({ ok: false, errors: [expect.stringMatching(/^not JSON/)] });
    expect(parseSections('[]')).toMatchObject({ ok: false });
    expect(parseSections('{}')).toEqual({ ok: false, errors: ['at least one section'] });
    const bad = parseSections('{"interfaces": {}, "hybla": {"rtt0_ms": -1, "nope": 1}}');
    expect(bad.ok).toBe(false);
    if (!bad.ok) {
      expect(bad.errors).toContain('interfaces: not a section the hub sets (bypass, cache, classes, dns, hybla, quic, satellite, shaping, splitter, sites)');
      expect(bad.errors.some((e) => e.startsWith('hybla.rtt0_ms: must be at least'))).toBe(true);
      expect(bad.errors).toContain('hybla.nope: not a field the gateway knows');
    }
  });

  it('sets one section in the editor text, leaving text it cannot read alone', () => {
    expect(JSON.parse(withSection('', 'quic', 'pass'))).toEqual({ quic: 'pass' });
    expect(JSON.parse(withSection('{"quic": "pass"}', 'hybla', sectionDefault('hybla')))).toEqual({ quic: 'pass', hybla: { rtt0_ms: 25, base_rtt_ms: 0, cwnd_max: 0 } });
    expect(withSection('{oops', 'quic', 'pass')).toBe('{oops');
  });
});
