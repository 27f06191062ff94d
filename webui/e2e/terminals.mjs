#!/usr/bin/env node
/* global document -- used inside a function that runs in the page */
// End-to-end: an operator enrolls a terminal at the hub from the dashboard, sees it connect, and revokes it.
// Against the fake gateway (perigee_fakes) running as a hub, at which one terminal identity keeps dialing in (admitted
// with its pool once enrolled, refused otherwise: perigee_fakes.fake_peer). Every step is the browser's; the
// API is asked only to check what the steps left (the config versions and the audit log).
//   node e2e/terminals.mjs
// Knobs as e2e/run.mjs: PERIGEE_E2E_SCREENSHOTS, PERIGEE_E2E_KEEP, PERIGEE_E2E_BUILD.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { stopAll } from './harness.mjs';
import { finishWorkDir, firstLogin, launchBrowser, makeWorkDir, shotsDir, startApi, startFakeGateway, startWebServer } from './dashboard-stack.mjs';
import { Steps } from './steps.mjs';

const NEW_PASSWORD = 'e2e-Perigee-terminals-2026';
const TERMINAL = 'alpha';
// The terminal's identity as its own dashboard would show it.
const FINGERPRINT = `sha256:${randomBytes(32).toString('hex')}`;

const tmp = makeWorkDir('perigee-e2e-terminals-');
const steps = new Steps();
let context;
let ok = false;
try {
  let baseUrl;
  let password;
  await steps.run('fake hub gateway (a terminal dialing in), API, dashboard, browser', async () => {
    const socket = await startFakeGateway(tmp, { flows: 20, env: { PERIGEE_E2E_DIAL: FINGERPRINT } });
    const backend = await startApi(tmp, { socket });
    baseUrl = await startWebServer(tmp, backend.apiUrl);
    password = backend.password;
    context = await launchBrowser(tmp);
  });
  const page = context ? (context.pages()[0] ?? (await context.newPage())) : null;
  if (page) steps.onFailure = (name) => page.screenshot({ path: join(tmp, `failed-${name.replace(/[^a-z0-9]+/gi, '-')}.png`), fullPage: true });
  const api = async (path) => {
    const res = await context.request.get(`${baseUrl}/api/v1${path}`);
    assert.equal(res.status(), 200, `GET ${path}: ${res.status()}`);
    return res.json();
  };
  const row = () => page.getByRole('table', { name: 'Enrolled terminals' }).locator(`tr[data-terminal="${TERMINAL}"]`);
  let versionsBefore;

  await steps.run('log in with the one-time password, forced change', async () => {
    await firstLogin(page, `${baseUrl}/terminals`, { password, newPassword: NEW_PASSWORD });
    versionsBefore = (await api('/versions')).total;
  });

  await steps.run('the Terminals page: none enrolled, the hub refuses the dialing identity', async () => {
    await page.getByRole('navigation', { name: 'Main navigation' }).getByRole('link', { name: 'Terminals', exact: true }).click();
    await page.getByRole('heading', { level: 2, name: 'Terminals', exact: true }).waitFor();
    await page.getByText('No terminal is enrolled').waitFor();
    await page.getByTestId('refused-unknown').filter({ hasText: /: [1-9]\d*$/ }).waitFor();
  });

  await steps.run('a malformed fingerprint is named before anything is sent', async () => {
    const form = page.getByRole('form', { name: 'Enroll a terminal' });
    await form.getByLabel(/^Name/).fill(TERMINAL);
    await form.getByLabel(/^Site prefixes/).fill('10.71.1.0/24\nfd71:1::/64');
    await form.getByLabel(/^Terminal fingerprint/).fill(FINGERPRINT.toUpperCase());
    await form.getByRole('button', { name: 'Enroll and apply' }).click();
    await form.getByText(/64 lowercase hex digits/).waitFor();
    assert.equal((await api('/versions')).total, versionsBefore, 'nothing stored');
  });

  await steps.run('enroll it: a new version, applied; the terminal shows connected with its pool and flow', async () => {
    const form = page.getByRole('form', { name: 'Enroll a terminal' });
    await form.getByLabel(/^Terminal fingerprint/).fill(FINGERPRINT);
    await form.getByRole('button', { name: 'Enroll and apply' }).click();
    await row().getByText('connected', { exact: true }).waitFor({ timeout: 20000 });
    await row().getByText('5 / 1', { exact: true }).waitFor();
    const title = await row().getByText(/^sha256:/).getAttribute('title');
    assert.equal(title, FINGERPRINT);
    const desired = await api('/config');
    assert.deepEqual(desired.config.peer.terminals, [{ name: TERMINAL, fingerprints: [FINGERPRINT], prefixes: ['10.71.1.0/24', 'fd71:1::/64'] }]);
    assert.equal(desired.comment, `enroll terminal ${TERMINAL}`);
    assert.equal((await api('/versions')).active_version_id, desired.id, 'applied');
    if (shotsDir) await page.screenshot({ path: join(shotsDir, 'terminals.png'), fullPage: true });
  });

  await steps.run('revoke it: the consequence is named first, then its connections are gone and it is refused', async () => {
    const refusedBefore = Number((await page.getByTestId('refused-unknown').textContent()).match(/(\d+)$/)[1]);
    await row().getByRole('button', { name: 'Revoke…' }).click();
    const dialog = page.getByRole('dialog', { name: `Revoke terminal ${TERMINAL}?` });
    await dialog.getByText(/5 idle connections and 1 live flow at the hub are closed within 5 s/).waitFor();
    await dialog.getByText(/refused from then on/).waitFor();
    await dialog.getByRole('button', { name: `Revoke ${TERMINAL}` }).click();
    await dialog.waitFor({ state: 'detached' });
    await row().waitFor({ state: 'detached' });
    await page.getByText('No terminal is enrolled').waitFor();
    // It keeps dialing and is refused from then on.
    await page.waitForFunction(
      ([before]) => Number(document.querySelector('[data-testid="refused-unknown"]')?.textContent?.match(/(\d+)$/)?.[1]) > before,
      [refusedBefore],
      { timeout: 20000 },
    );
    const desired = await api('/config');
    assert.deepEqual(desired.config.peer.terminals, []);
    assert.equal(desired.comment, `revoke terminal ${TERMINAL}`);
    assert.equal((await api('/versions')).total, versionsBefore + 2);
  });

  await steps.run('the audit log has both changes with who made them', async () => {
    const { entries } = await api('/audit?limit=20');
    const enrolled = entries.find((e) => e.action === 'POST /api/v1/peer/terminals');
    const revoked = entries.find((e) => e.action === `DELETE /api/v1/peer/terminals/${TERMINAL}`);
    assert.ok(enrolled && revoked, JSON.stringify(entries.map((e) => e.action)));
    assert.equal(enrolled.actor, 'admin');
    assert.equal(enrolled.detail.fingerprint, FINGERPRINT);
    assert.equal(revoked.detail.terminal, TERMINAL);
  });
  ok = steps.summary();
} catch (e) {
  await steps.run('start the API, the dashboard and the browser', () => {
    throw e;
  });
  ok = steps.summary();
} finally {
  await context?.close().catch(() => {});
  await stopAll();
  finishWorkDir(tmp, ok);
}
process.exit(ok ? 0 : 1);
