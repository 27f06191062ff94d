#!/usr/bin/env node
// End-to-end suite: the built dashboard in Debian's Chromium (playwright-core, no downloaded browser)
// against the real API. By default it starts the API (python -m perigee_api from the repo's .venv) with
// a temp data dir and the API's fake gateway driven by e2e/fake_gateway_server.py.
//
// Point it at a running API instead (e.g. one wired to a satlab-backed gateway):
//   PERIGEE_E2E_API_URL=http://127.0.0.1:8000 PERIGEE_E2E_PASSWORD=... [PERIGEE_E2E_USER=admin]
//   [PERIGEE_E2E_NEW_PASSWORD=...] (used if the account must change its password)
//   [PERIGEE_E2E_MIN_FLOWS=1] (wait until at least this many live flows show, e.g. during a download)
// Screenshots go to docs/screenshots (PERIGEE_E2E_SCREENSHOTS=dir to change, =0 to skip).
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execFileSync } from 'node:child_process';
import { chromium } from 'playwright-core';
import { freePort, start, stopAll, waitForHttp } from './harness.mjs';
import { Steps } from './steps.mjs';
import { dashboardSteps } from './scenario.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const webui = resolve(here, '..');
const repo = resolve(webui, '..');
const tmp = mkdtempSync(join(tmpdir(), 'perigee-e2e-'));
const shotsSetting = process.env.PERIGEE_E2E_SCREENSHOTS ?? join(repo, 'docs', 'screenshots');
const shotsDir = shotsSetting === '0' ? null : resolve(shotsSetting);
const chromiumPath = process.env.PERIGEE_CHROMIUM ?? '/usr/bin/chromium';
const python = process.env.PERIGEE_PYTHON ?? join(repo, '.venv', 'bin', 'python');

async function startBackend() {
  if (process.env.PERIGEE_E2E_API_URL) {
    const password = process.env.PERIGEE_E2E_PASSWORD;
    if (!password) throw new Error('PERIGEE_E2E_API_URL needs PERIGEE_E2E_PASSWORD');
    return { apiUrl: process.env.PERIGEE_E2E_API_URL.replace(/\/$/, ''), password, external: true };
  }
  const dataDir = join(tmp, 'data');
  mkdirSync(dataDir);
  const socket = join(tmp, 'control.sock');
  const pyEnv = { PYTHONPATH: join(repo, 'api') };
  const gw = start('fake gateway', python, [join(here, 'fake_gateway_server.py'), socket, process.env.PERIGEE_E2E_FLOWS ?? '120'], {
    env: pyEnv,
    logFile: join(tmp, 'gateway.log'),
  });
  const deadline = Date.now() + 20000;
  while (!existsSync(socket)) {
    if (gw.exited !== undefined || Date.now() > deadline) throw new Error(`fake gateway did not start: ${readFileSync(join(tmp, 'gateway.log'), 'utf8')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  // nginx's certificate directory, as the demo makes it: the System health page's TLS card shows it.
  const tlsDir = join(tmp, 'tls');
  mkdirSync(tlsDir, { mode: 0o700 });
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '825',
    '-subj', '/CN=perigee-e2e/O=Perigee e2e (self-signed)', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
    '-keyout', join(tlsDir, 'key.pem'), '-out', join(tlsDir, 'cert.pem')], { stdio: 'ignore' });
  const port = await freePort();
  const api = start('api', python, ['-m', 'perigee_api'], {
    cwd: join(repo, 'api'),
    env: {
      ...pyEnv,
      PERIGEE_DATA_DIR: dataDir,
      PERIGEE_LISTEN: `127.0.0.1:${port}`,
      PERIGEE_GATEWAY_SOCKET: socket,
      PERIGEE_TLS_DIR: tlsDir,
      PERIGEE_SECURE_COOKIES: 'false', // plain http on loopback in the test
      PERIGEE_ALLOW_ROOT: '1', // the test machine runs as root; production does not
    },
    logFile: join(tmp, 'api.log'),
  });
  const apiUrl = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${apiUrl}/api/v1/health`, { child: api, timeoutMs: 60000 });
  } catch (e) {
    console.log(readFileSync(join(tmp, 'api.log'), 'utf8').split('\n').slice(-30).join('\n'));
    throw e;
  }
  const password = readFileSync(join(dataDir, 'initial-admin-password'), 'utf8').trim();
  return { apiUrl, password, external: false };
}

async function startWebServer(apiUrl) {
  if (!existsSync(join(webui, 'dist', 'index.html')) || process.env.PERIGEE_E2E_BUILD === '1') {
    execFileSync(join(webui, 'node_modules', '.bin', 'vite'), ['build', '--logLevel', 'warn'], { cwd: webui, stdio: 'inherit' });
  }
  const port = await freePort();
  const web = start('vite preview', join(webui, 'node_modules', '.bin', 'vite'), ['preview', '--host', '127.0.0.1', '--port', String(port), '--strictPort'], {
    cwd: webui,
    env: { PERIGEE_API_URL: apiUrl },
    logFile: join(tmp, 'web.log'),
  });
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(url, { child: web });
  return url;
}

const steps = new Steps();
let context;
let ok = false;
try {
  console.log(`e2e: working dir ${tmp}`);
  const backend = await startBackend();
  const baseUrl = await startWebServer(backend.apiUrl);
  console.log(`e2e: dashboard ${baseUrl} → API ${backend.apiUrl}${backend.external ? ' (external)' : ' (fake gateway)'}`);
  context = await chromium.launchPersistentContext(join(tmp, 'chromium-profile'), {
    executablePath: chromiumPath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 800 },
    colorScheme: 'light',
  });
  context.setDefaultTimeout(15000);
  if (shotsDir) mkdirSync(shotsDir, { recursive: true });
  await dashboardSteps(steps, {
    context,
    baseUrl,
    user: process.env.PERIGEE_E2E_USER ?? 'admin',
    password: backend.password,
    newPassword: process.env.PERIGEE_E2E_NEW_PASSWORD ?? 'e2e-Perigee-orbit-2026',
    minFlows: Number(process.env.PERIGEE_E2E_MIN_FLOWS ?? (backend.external ? 0 : 1)),
    shotsDir,
    failDir: tmp,
  });
} catch (e) {
  await steps.run('start the API, the dashboard and the browser', () => {
    throw e;
  });
} finally {
  ok = steps.summary();
  await context?.close().catch(() => {});
  await stopAll();
  if (ok && !process.env.PERIGEE_E2E_KEEP) rmSync(tmp, { recursive: true, force: true });
  else console.log(`e2e: logs kept in ${tmp}`);
}
process.exit(ok ? 0 : 1);
