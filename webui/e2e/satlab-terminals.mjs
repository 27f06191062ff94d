#!/usr/bin/env node
/* global document -- used inside a function that runs in the page */
// End-to-end with the real gateways: an operator enrolls a terminal at the hub from the dashboard, sees its
// warm pool connected at the hub, and revokes it; its connections are then gone. satlab (prefix ut-, leo)
// with a gateway at each end (`--gateway both`: each has its own identity, and the lab enrolls the terminal as
// `site-1`); the API runs on this host with the hub's control socket. The lab's own enrollment is revoked first
// through the API, so the dashboard starts from a hub that refuses the terminal. Needs root; run it under the
// netns lock.
//   node e2e/satlab-terminals.mjs
// Knobs as e2e/satlab.mjs: PERIGEE_E2E_SCREENSHOTS, PERIGEE_E2E_KEEP, PERIGEE_E2E_BUILD, SATLAB_TERMINALS_PREFIX.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { controlGet } from './control.mjs';
import { stopAll, until as untilEvery } from './harness.mjs';
import { finishWorkDir, firstLogin, launchBrowser, makeWorkDir, repo, startApi, startWebServer } from './dashboard-stack.mjs';
import { Steps } from './steps.mjs';

const PREFIX = process.env.SATLAB_TERMINALS_PREFIX ?? 'ut-';
const SATLAB = join(repo, 'bin', 'satlab');
const SITE = 'site-1';
const PREFIXES = ['10.71.1.0/24', 'fd71:1::/64'];
const NEW_PASSWORD = 'e2e-Perigee-sat-terminals-2026';
const sock = (role) => `/run/satlab/${PREFIX}/gw-${PREFIX}${role}.sock`;

function satlab(args, timeoutMs = 240000) {
  return new Promise((resolve, reject) => {
    execFile(SATLAB, ['--prefix', PREFIX, ...args], { timeout: timeoutMs, maxBuffer: 4 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`satlab ${args.join(' ')} failed: ${stderr || stdout}`));
      else resolve(stdout);
    });
  });
}

/** GET `path` of a gateway's control protocol on its Unix socket. */
const control = (role, path) => controlGet(sock(role), path, { timeoutMs: 5000 });

// This suite's waits give up after 30000 ms unless they say otherwise.
const until = (what, fn, opts = {}) => untilEvery(what, fn, { timeoutMs: 30000, ...opts });

/** The hub's view of the lab's terminal (GET /v1/peer), undefined when not enrolled. */
const atHub = async () => (await control('hub', '/v1/peer')).terminals.find((t) => t.name === SITE);

const tmp = makeWorkDir('perigee-e2e-sat-terminals-');
const steps = new Steps();
let context;
let ok = false;
async function teardown() {
  await context?.close().catch(() => {});
  await stopAll();
  await satlab(['down'], 120000).catch((e) => console.log(`e2e: satlab down failed: ${e.message}`));
}
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.once(sig, async () => {
    await teardown();
    process.exit(130);
  });
}

try {
  if (process.getuid?.() !== 0) throw new Error('the satlab terminals suite needs root (network namespaces)');
  let baseUrl;
  let password;
  let fingerprint;
  await steps.run(`satlab ${PREFIX} up (leo, gateways at both ends), API on the hub, dashboard, browser`, async () => {
    await satlab(['down'], 120000);
    console.log(`    ${(await satlab(['up', '--profile', 'leo', '--gateway', 'both'])).trim()}`);
    fingerprint = (await control('terminal', '/v1/identity')).fingerprint;
    assert.match(fingerprint, /^sha256:[0-9a-f]{64}$/);
    const backend = await startApi(tmp, { socket: sock('hub') });
    baseUrl = await startWebServer(tmp, backend.apiUrl);
    password = backend.password;
    context = await launchBrowser(tmp, { handleSIGINT: false, handleSIGTERM: false, handleSIGHUP: false });
  });
  const page = context ? (context.pages()[0] ?? (await context.newPage())) : null;
  if (page) steps.onFailure = (name) => page.screenshot({ path: join(tmp, `failed-${name.replace(/[^a-z0-9]+/gi, '-')}.png`), fullPage: true });
  const call = async (method, path, body) => {
    const csrf = (await context.cookies()).find((c) => c.name === 'perigee_csrf')?.value ?? '';
    const res = await context.request.fetch(`${baseUrl}/api/v1${path}`, { method, data: body, headers: { 'X-CSRF-Token': csrf } });
    const text = await res.text();
    assert.ok(res.status() < 300, `${method} /api/v1${path}: ${res.status()} ${text}`);
    return JSON.parse(text);
  };
  const row = () => page.getByRole('table', { name: 'Enrolled terminals' }).locator(`tr[data-terminal="${SITE}"]`);

  await steps.run('log in; the lab enrolled the terminal: withdrawn through the API, the hub refuses it', async () => {
    await firstLogin(page, `${baseUrl}/`, { password, newPassword: NEW_PASSWORD });
    const listed = await call('GET', '/peer/terminals');
    assert.deepEqual(listed.terminals.map((t) => [t.name, t.fingerprints]), [[SITE, [fingerprint]]], 'the API imported the lab config');
    const res = await call('DELETE', `/peer/terminals/${SITE}`);
    assert.equal(res.apply.ok, true, JSON.stringify(res.apply));
    await until('the hub to refuse the terminal', async () => (await atHub()) === undefined && (await control('hub', '/v1/peer')).refused_unknown > 0);
  });

  await steps.run('enroll it from the dashboard: connected at the hub with its warm pool', async () => {
    await page.getByRole('navigation', { name: 'Main navigation' }).getByRole('link', { name: 'Terminals', exact: true }).click();
    const form = page.getByRole('form', { name: 'Enroll a terminal' });
    await form.getByLabel(/^Name/).fill(SITE);
    await form.getByLabel(/^Site prefixes/).fill(PREFIXES.join('\n'));
    await form.getByLabel(/^Terminal fingerprint/).fill(fingerprint);
    await form.getByRole('button', { name: 'Enroll and apply' }).click();
    await row().getByText('connected', { exact: true }).waitFor({ timeout: 60000 });
    const hub = await until('idle connections at the hub', async () => {
      const t = await atHub();
      return t && t.idle_connections > 0 ? t : null;
    });
    await page.waitForFunction(
      ([name]) => /^[1-9]\d* \//.test(document.querySelector(`tr[data-terminal="${name}"] td:nth-child(5)`)?.textContent ?? ''),
      [SITE],
    );
    console.log(`    the hub holds ${hub.idle_connections} idle connections of ${SITE}`);
  });

  await steps.run('revoke it: the consequence named, then its connections are gone at the hub within 5 s', async () => {
    await row().getByRole('button', { name: 'Revoke…' }).click();
    const dialog = page.getByRole('dialog', { name: `Revoke terminal ${SITE}?` });
    await dialog.getByText(/idle connections? and \d+ live flows? at the hub are closed within 5 s/).waitFor();
    const refused = (await control('hub', '/v1/peer')).refused_unknown;
    await dialog.getByRole('button', { name: `Revoke ${SITE}` }).click();
    await row().waitFor({ state: 'detached' });
    // The new version is applied when the row goes: from then on, 5 s at most.
    const applied = Date.now();
    await until('the hub to drop the terminal', async () => (await atHub()) === undefined, { timeoutMs: 5000 });
    const dropped = Date.now() - applied;
    // It keeps dialing; each attempt is refused.
    await until('a refused attempt', async () => (await control('hub', '/v1/peer')).refused_unknown > refused, { timeoutMs: 30000 });
    const pool = (await control('terminal', '/v1/peer')).pool;
    await until('the terminal pool to empty', async () => (await control('terminal', '/v1/peer')).pool?.ready === 0, { timeoutMs: 5000 });
    console.log(`    revoked; the hub dropped it ${dropped} ms after the apply; the terminal's pool emptied (was ${pool?.ready})`);
  });
  ok = steps.summary();
} catch (e) {
  await steps.run('start satlab, the API, the dashboard and the browser', () => {
    throw e;
  });
  ok = steps.summary();
} finally {
  await teardown();
  finishWorkDir(tmp, ok);
}
process.exit(ok ? 0 : 1);
