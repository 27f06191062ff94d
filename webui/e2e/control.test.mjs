// The e2e suites' control-socket client against a server on a Unix socket: the JSON of a 200, an error naming
// the path and status for anything else, and an error (not a hang) when the gateway never answers.
import { createServer } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { controlGet } from './control.mjs';

describe('controlGet', () => {
  const dir = mkdtempSync(join(tmpdir(), 'pg-ctl-'));
  const socket = join(dir, 'gw.sock');
  const seen = [];
  const server = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    if (req.url === '/v1/health') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ status: 'ok', workers: [] }));
    } else if (req.url === '/v1/silent') {
      // never answers: the client's timeout must end the request
    } else {
      res.writeHead(404, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 'not_found' } }));
    }
  });

  beforeAll(() => new Promise((resolve) => server.listen(socket, resolve)));
  afterAll(() => {
    server.closeAllConnections();
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('resolves to the JSON of a 200', async () => {
    await expect(controlGet(socket, '/v1/health')).resolves.toEqual({ status: 'ok', workers: [] });
    expect(seen).toContain('GET /v1/health');
  });

  it('rejects anything else naming the path and the status', async () => {
    await expect(controlGet(socket, '/v1/nothing')).rejects.toThrow(/GET \/v1\/nothing: 404 .*not_found/);
  });

  it('rejects when the gateway does not answer in time', async () => {
    await expect(controlGet(socket, '/v1/silent', { timeoutMs: 200 })).rejects.toThrow(/\/v1\/silent: no answer in 200 ms/);
  });

  it('rejects when nothing listens on the socket', async () => {
    await expect(controlGet(join(dir, 'absent.sock'), '/v1/health')).rejects.toThrow(/ENOENT/);
  });
});
