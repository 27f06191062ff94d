import { describe, expect, it } from 'vitest';
import { checkJoin, joinCommands, joinFileText, suggestedHubUrl } from './join-file';

const PIN = `sha256:${'f'.repeat(64)}`;

describe('join file', () => {
  it('is the JSON the terminal reads, and the commands that install it', () => {
    const j = { hub_url: 'https://hub.example.net:8443', hub_pin: PIN, token: 'pgt1.abc' };
    expect(JSON.parse(joinFileText(j))).toEqual(j);
    const cmds = joinCommands(j);
    expect(cmds).toContain('/var/lib/perigee/join.json');
    expect(cmds).toContain('PERIGEE_JOIN_FILE=/var/lib/perigee/join.json');
    expect(cmds).toContain('"token": "pgt1.abc"');
  });

  it('checks the hub address and pin', () => {
    expect(checkJoin({ hub_url: 'https://hub.example.net', hub_pin: PIN })).toEqual({});
    expect(checkJoin({ hub_url: 'https://[fd71:3::1]:8443', hub_pin: PIN })).toEqual({});
    expect(Object.keys(checkJoin({ hub_url: 'http://hub', hub_pin: PIN.toUpperCase() }))).toEqual(['hub_url', 'hub_pin']);
    expect(checkJoin({ hub_url: 'https://hub/path', hub_pin: PIN }).hub_url).toBeDefined();
  });

  it('suggests the dashboard’s own address only over https', () => {
    expect(suggestedHubUrl('https://hub.example.net')).toBe('https://hub.example.net');
    expect(suggestedHubUrl('http://127.0.0.1:5173')).toBe('');
  });
});
