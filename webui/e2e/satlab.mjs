#!/usr/bin/env node
// End-to-end suite against the REAL gateway: satlab (profile geo-hts, splitter daemon in the hub
// namespace), the API wired to the daemon's control socket, the built dashboard served by vite preview,
// Debian's Chromium via playwright-core. Needs root (namespaces). Always tears everything down.
//   node e2e/satlab.mjs            (or make test-satlab)
// Knobs: PERIGEE_E2E_SCREENSHOTS=<dir>|0 (default docs/screenshots), PERIGEE_E2E_KEEP=1 (keep logs),
// PERIGEE_E2E_BUILD=1 (rebuild dist), PERIGEE_CHROMIUM, PERIGEE_PYTHON, SATLAB_E2E_PREFIX (default ue-).
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execFileSync } from 'node:child_process';
import { chromium } from 'playwright-core';
import { freePort, start, stopAll, waitForHttp } from './harness.mjs';
import { Steps } from './steps.mjs';
import { Lab } from './lab.mjs';
import { satlabSteps } from './satlab-scenario.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const webui = resolve(here, '..');
const repo = resolve(webui, '..');
const tmp = mkdtempSync(join(tmpdir(), 'perigee-e2e-satlab-'));
const shotsSetting = process.env.PERIGEE_E2E_SCREENSHOTS ?? join(repo, 'docs', 'screenshots');
const shotsDir = shotsSetting === '0' ? null : resolve(shotsSetting);
const python = process.env.PERIGEE_PYTHON ?? join(repo, '.venv', 'bin', 'python');
// geo-hts: 600 ms RTT and 50 Mbit/s forward, so a 40 MB download lasts ~13 s (long enough to watch it
// live), Hybla has a long RTT to act on, and a 20 Mbit/s pacing cap binds visibly below the link rate.
const PROFILE = 'geo-hts';
const lab = new Lab(repo, process.env.SATLAB_E2E_PREFIX ?? 'ue-');

async function startApi() {
  const dataDir = join(tmp, 'data');
  mkdirSync(dataDir);
  const port = await freePort();
  const api = start('api', python, ['-m', 'perigee_api'], {
    cwd: join(repo, 'api'),
    env: {
      PYTHONPATH: join(repo, 'api'),
      PERIGEE_DATA_DIR: dataDir,
      PERIGEE_LISTEN: `127.0.0.1:${port}`,
      PERIGEE_GATEWAY_SOCKET: lab.socket,
      PERIGEE_SECURE_COOKIES: 'false', // plain http on loopback in the test
      PERIGEE_ALLOW_ROOT: '1', // satlab needs root; production runs the API unprivileged
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
  return { apiUrl, password: readFileSync(join(dataDir, 'initial-admin-password'), 'utf8').trim() };
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

let tornDown;
/** Closes the browser, stops the API and the preview server, takes the lab down; once, whoever asks. */
function teardown() {
  tornDown ??= (async () => {
    const keepAlive = setInterval(() => {}, 1000); // an empty event loop must not end the process mid-way
    const close = context?.close().catch(() => {});
    await Promise.race([close, new Promise((r) => setTimeout(r, 10000))]);
    await stopAll();
    await lab.down().catch((e) => console.log(`e2e: satlab down failed: ${e.message}`));
    clearInterval(keepAlive);
  })();
  return tornDown;
}

const steps = new Steps();
let context;
let ok = false;
const t0 = Date.now();
process.on('unhandledRejection', (e) => console.log(`e2e: unhandled rejection: ${e?.message ?? e}`));
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.once(sig, async () => {
    console.log(`e2e: ${sig}, tearing down`);
    await teardown();
    process.exit(130);
  });
}
try {
  if (process.getuid?.() !== 0) throw new Error('the satlab suite needs root (network namespaces)');
  console.log(`e2e: working dir ${tmp}`);
  await steps.run(`satlab ${lab.prefix} up (${PROFILE}, gateway in the hub), API, dashboard, browser`, async () => {
    console.log(`    ${(await lab.up(PROFILE)).trim()}`);
    const backend = await startApi();
    const baseUrl = await startWebServer(backend.apiUrl);
    console.log(`    dashboard ${baseUrl} → API ${backend.apiUrl} → gateway ${lab.socket}`);
    context = await chromium.launchPersistentContext(join(tmp, 'chromium-profile'), {
      executablePath: process.env.PERIGEE_CHROMIUM ?? '/usr/bin/chromium',
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
      viewport: { width: 1280, height: 800 },
      colorScheme: 'light',
      // The suite's own handlers tear down the lab too; Playwright's would only kill the browser.
      handleSIGINT: false,
      handleSIGTERM: false,
      handleSIGHUP: false,
    });
    context.setDefaultTimeout(15000);
    if (shotsDir) mkdirSync(shotsDir, { recursive: true });
    Object.assign(steps, { baseUrl, password: backend.password });
  });
  if (context) {
    await satlabSteps(steps, { context, baseUrl: steps.baseUrl, password: steps.password, lab, shotsDir, failDir: tmp });
  }
} catch (e) {
  await steps.run('run the satlab suite', () => {
    throw e;
  });
} finally {
  ok = steps.summary();
  await teardown();
  console.log(`e2e: satlab suite took ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  if (ok && !process.env.PERIGEE_E2E_KEEP) rmSync(tmp, { recursive: true, force: true });
  else console.log(`e2e: logs kept in ${tmp}`);
}
process.exit(ok ? 0 : 1);
