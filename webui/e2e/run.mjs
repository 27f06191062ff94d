#!/usr/bin/env node
// End-to-end suite: the built dashboard in Debian's Chromium (playwright-core, no downloaded browser)
// against the real API. By default it starts the API (python -m perigee_api from the repo's .venv) with
// a temp data dir and the fake gateway (perigee_fakes) driven by e2e/fake_gateway_server.py.
//
// Point it at a running API instead (e.g. one wired to a satlab-backed gateway):
//   PERIGEE_E2E_API_URL=http://127.0.0.1:8000 PERIGEE_E2E_PASSWORD=... [PERIGEE_E2E_USER=admin]
//   [PERIGEE_E2E_NEW_PASSWORD=...] (used if the account must change its password)
//   [PERIGEE_E2E_MIN_FLOWS=1] (wait until at least this many live flows show, e.g. during a download)
// Screenshots go to docs/screenshots (PERIGEE_E2E_SCREENSHOTS=dir to change, =0 to skip).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { stopAll } from './harness.mjs';
import { finishWorkDir, launchBrowser, makeWorkDir, shotsDir, startApi, startFakeGateway, startWebServer } from './dashboard-stack.mjs';
import { Steps } from './steps.mjs';
import { dashboardSteps } from './scenario.mjs';

const tmp = makeWorkDir('perigee-e2e-');

async function startBackend() {
  if (process.env.PERIGEE_E2E_API_URL) {
    const password = process.env.PERIGEE_E2E_PASSWORD;
    if (!password) throw new Error('PERIGEE_E2E_API_URL needs PERIGEE_E2E_PASSWORD');
    return { apiUrl: process.env.PERIGEE_E2E_API_URL.replace(/\/$/, ''), password, external: true };
  }
  const socket = await startFakeGateway(tmp, { flows: process.env.PERIGEE_E2E_FLOWS ?? 120 });
  // nginx's certificate directory, as the demo makes it: the System health page's TLS card shows it.
  const tlsDir = join(tmp, 'tls');
  mkdirSync(tlsDir, { mode: 0o700 });
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '825',
    '-subj', '/CN=perigee-e2e/O=Perigee e2e (self-signed)', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
    '-keyout', join(tlsDir, 'key.pem'), '-out', join(tlsDir, 'cert.pem')], { stdio: 'ignore' });
  const api = await startApi(tmp, { socket, env: { PERIGEE_TLS_DIR: tlsDir } });
  return { ...api, external: false };
}

const steps = new Steps();
let context;
let ok = false;
try {
  console.log(`e2e: working dir ${tmp}`);
  const backend = await startBackend();
  const baseUrl = await startWebServer(tmp, backend.apiUrl);
  console.log(`e2e: dashboard ${baseUrl} → API ${backend.apiUrl}${backend.external ? ' (external)' : ' (fake gateway)'}`);
  context = await launchBrowser(tmp);
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
  finishWorkDir(tmp, ok);
}
process.exit(ok ? 0 : 1);
