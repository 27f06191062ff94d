// What both e2e suites (run.mjs, satlab.mjs) bring up around the dashboard: a work dir for the run,
// the API, the built dashboard behind vite preview, and Debian's Chromium via playwright-core. Where the
// API's gateway comes from (fake or satlab) is the suite's business.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execFileSync } from 'node:child_process';
import { chromium } from 'playwright-core';
import { HUNG_MS, freePort, start, waitForHttp } from './harness.mjs';

const webui = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const repo = resolve(webui, '..');
export const python = process.env.PERIGEE_PYTHON ?? join(repo, '.venv', 'bin', 'python');
const shotsSetting = process.env.PERIGEE_E2E_SCREENSHOTS ?? join(repo, 'docs', 'screenshots');
/** Where the suites save screenshots; null when PERIGEE_E2E_SCREENSHOTS=0. */
export const shotsDir = shotsSetting === '0' ? null : resolve(shotsSetting);

/** A fresh temp dir for the run's data, logs and browser profile. */
export function makeWorkDir(prefix) {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** Removes the work dir after a passing run (unless PERIGEE_E2E_KEEP); otherwise says where the logs are. */
export function finishWorkDir(tmp, ok) {
  if (ok && !process.env.PERIGEE_E2E_KEEP) rmSync(tmp, { recursive: true, force: true });
  else console.log(`e2e: logs kept in ${tmp}`);
}

/**
 * Starts the fake gateway (e2e/fake_gateway_server.py: perigee_fakes with moving synthetic traffic, `flows` of them)
 * on a control socket in `tmp`; `env` adds its knobs (PERIGEE_E2E_DIAL, PERIGEE_E2E_BOOT). Resolves to the socket.
 */
export async function startFakeGateway(tmp, { flows = 120, env = {} } = {}) {
  const socket = join(tmp, 'control.sock');
  const gw = start('fake gateway', python, [join(webui, 'e2e', 'fake_gateway_server.py'), socket, String(flows)], {
    env,
    logFile: join(tmp, 'gateway.log'),
  });
  const deadline = Date.now() + HUNG_MS;
  while (!existsSync(socket)) {
    if (gw.exited !== undefined || Date.now() > deadline) throw new Error(`fake gateway did not start: ${readFileSync(join(tmp, 'gateway.log'), 'utf8')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return socket;
}

/**
 * Starts the API (python -m perigee_api) with a fresh data dir in `tmp`, talking to the gateway control
 * socket `socket`; `env` adds settings. Resolves to its URL and the initial admin password.
 */
export async function startApi(tmp, { socket, env = {} }) {
  const dataDir = join(tmp, 'data');
  mkdirSync(dataDir);
  const port = await freePort();
  const api = start('api', python, ['-m', 'perigee_api'], {
    cwd: join(repo, 'api'),
    env: {
      PERIGEE_DATA_DIR: dataDir,
      PERIGEE_LISTEN: `127.0.0.1:${port}`,
      PERIGEE_GATEWAY_SOCKET: socket,
      PERIGEE_SECURE_COOKIES: 'false', // plain http on loopback in the test
      PERIGEE_ALLOW_ROOT: '1', // the suites run as root (satlab needs it); production runs the API unprivileged
      ...env,
    },
    logFile: join(tmp, 'api.log'),
  });
  const apiUrl = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${apiUrl}/api/v1/health`, { child: api });
  } catch (e) {
    console.log(readFileSync(join(tmp, 'api.log'), 'utf8').split('\n').slice(-30).join('\n'));
    throw e;
  }
  return { apiUrl, password: readFileSync(join(dataDir, 'initial-admin-password'), 'utf8').trim() };
}

/** Serves dist/ (built first if missing or PERIGEE_E2E_BUILD=1) with vite preview, proxying to `apiUrl`. */
export async function startWebServer(tmp, apiUrl) {
  const vite = join(webui, 'node_modules', '.bin', 'vite');
  if (!existsSync(join(webui, 'dist', 'index.html')) || process.env.PERIGEE_E2E_BUILD === '1') {
    execFileSync(vite, ['build', '--logLevel', 'warn'], { cwd: webui, stdio: 'inherit' });
  }
  const port = await freePort();
  const web = start('vite preview', vite, ['preview', '--host', '127.0.0.1', '--port', String(port), '--strictPort'], {
    cwd: webui,
    env: { PERIGEE_API_URL: apiUrl },
    logFile: join(tmp, 'web.log'),
  });
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(url, { child: web });
  return url;
}

/**
 * Headless Chromium (PERIGEE_CHROMIUM, default Debian's /usr/bin/chromium; never a downloaded one) with
 * its profile in `tmp`; `options` adds launch options. Also makes the screenshot dir.
 */
export async function launchBrowser(tmp, options = {}) {
  const context = await chromium.launchPersistentContext(join(tmp, 'chromium-profile'), {
    executablePath: process.env.PERIGEE_CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 800 },
    colorScheme: 'light',
    ...options,
  });
  context.setDefaultTimeout(HUNG_MS);
  if (shotsDir) mkdirSync(shotsDir, { recursive: true });
  return context;
}

/** Logs in at `url` with the one-time password and chooses `newPassword` when asked to; ends on the page headed
 * `landsOn` (the Overview; the setup wizard on a box that still needs its setup). */
export async function firstLogin(page, url, { user = 'admin', password, newPassword, landsOn = 'Overview' }) {
  await page.goto(url);
  await page.getByLabel('Username').fill(user);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Choose a new password' }).waitFor();
  await page.getByLabel('Current password').fill(password);
  await page.getByLabel(/^New password/).fill(newPassword);
  await page.getByLabel('Confirm new password').fill(newPassword);
  await page.getByRole('button', { name: 'Save password' }).click();
  await page.getByRole('heading', { level: 2, name: landsOn, exact: true }).waitFor();
}
