#!/usr/bin/env node
// End-to-end: a terminal managed from its hub, every step in the two dashboards. Two APIs, each with its fake gateway
// (perigee_fakes): a hub, behind an HTTPS front with a self-signed certificate as nginx would be (e2e/tls-front.mjs),
// and a terminal. The hub's operator makes an enrollment token on its Terminals page; the terminal's admin joins the
// hub with it on its System settings (the hub's key pinned); the hub's operator posts a config version on the
// terminal's page; the terminal runs it (its dashboard shows it managed, its config history the hub's version
// active) and the hub's page shows it applied. The APIs are asked only to check what the steps left.
//   node e2e/managed.mjs
// Knobs as e2e/run.mjs: PERIGEE_E2E_SCREENSHOTS, PERIGEE_E2E_KEEP, PERIGEE_E2E_BUILD.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { stopAll, until } from './harness.mjs';
import { finishWorkDir, firstLogin, launchBrowser, makeWorkDir, shotsDir, startApi, startFakeGateway, startWebServer } from './dashboard-stack.mjs';
import { reviewQuicPass, VERSION_FORM } from './managed-version.mjs';
import { Steps } from './steps.mjs';
import { startTlsFront } from './tls-front.mjs';

const NEW_PASSWORD = 'e2e-Perigee-managed-2026';
const TERMINAL = 'alpha';
const PREFIX = '10.71.1.0/24';

const tmp = makeWorkDir('perigee-e2e-managed-');
const steps = new Steps();
const contexts = [];
let front;
let ok = false;

/** One end: its fake gateway, its API, its dashboard and a browser of its own (the two share no cookie). */
async function startEnd(name, { gatewayEnv = {}, apiEnv = {} } = {}) {
  const dir = join(tmp, name);
  mkdirSync(dir);
  const socket = await startFakeGateway(dir, { flows: 10, env: gatewayEnv });
  const api = await startApi(dir, { socket, env: apiEnv });
  const baseUrl = await startWebServer(dir, api.apiUrl);
  const context = await launchBrowser(dir);
  contexts.push(context);
  const page = context.pages()[0] ?? (await context.newPage());
  const get = async (path) => {
    const res = await context.request.get(`${baseUrl}/api/v1${path}`);
    assert.equal(res.status(), 200, `${name}: GET ${path}: ${res.status()}`);
    return res.json();
  };
  return { name, dir, api, baseUrl, context, page, get };
}

try {
  let hub;
  let terminal;
  await steps.run('a hub (fake gateway, API behind an HTTPS front) and a terminal (fake gateway, API), two dashboards', async () => {
    hub = await startEnd('hub');
    delete process.env.PERIGEE_E2E_BUILD; // built once (for the hub's dashboard): the terminal's serves the same dist/
    front = await startTlsFront(join(tmp, 'tls'), hub.api.apiUrl);
    terminal = await startEnd('terminal', {
      gatewayEnv: { PERIGEE_E2E_ROLE: 'terminal' },
      apiEnv: { PERIGEE_INITIAL_ROLE: 'terminal', PERIGEE_MANAGED_REPORT_EVERY_S: '5' },
    });
    console.log(`e2e: hub ${hub.baseUrl} (HTTPS front ${front.url}, pin ${front.pin}), terminal ${terminal.baseUrl}`);
  });
  if (hub && terminal) {
    for (const end of [hub, terminal]) {
      end.page.on('pageerror', (e) => console.log(`e2e: ${end.name} page error: ${e.message}`));
    }
    steps.onFailure = async (name) => {
      for (const end of [hub, terminal]) {
        await end.page.screenshot({ path: join(tmp, `failed-${end.name}-${name.replace(/[^a-z0-9]+/gi, '-')}.png`), fullPage: true }).catch(() => {});
      }
    };
  }

  await steps.run('log in at both ends with the one-time password, forced change', async () => {
    await firstLogin(hub.page, `${hub.baseUrl}/terminals`, { password: hub.api.password, newPassword: NEW_PASSWORD });
    await firstLogin(terminal.page, `${terminal.baseUrl}/system`, { password: terminal.api.password, newPassword: NEW_PASSWORD });
  });

  let joinFile;
  await steps.run("the hub's operator makes an enrollment token: shown once, with the join file", async () => {
    const { page } = hub;
    await page.getByRole('navigation', { name: 'Main navigation' }).getByRole('link', { name: 'Terminals', exact: true }).click();
    await page.getByRole('heading', { level: 2, name: 'Terminals', exact: true }).waitFor();
    const form = page.getByRole('form', { name: 'Create an enrollment token' });
    await form.getByLabel(/^Terminal name/).fill(TERMINAL);
    await form.getByLabel(/^Site prefixes/).fill(PREFIX);
    await form.getByLabel(/^Comment/).fill('site A');
    await form.getByRole('button', { name: 'Create token' }).click();
    const panel = page.getByRole('status', { name: `Enrollment token for ${TERMINAL} created` });
    await panel.waitFor();
    const token = (await panel.getByLabel('Enrollment token', { exact: true }).textContent()).trim();
    assert.match(token, /^pgt1\./);
    await panel.getByLabel('Hub URL').fill(front.url);
    await panel.getByLabel('Hub pin').fill(front.pin);
    joinFile = JSON.parse(await panel.getByLabel('Join file', { exact: true }).textContent());
    assert.deepEqual(joinFile, { hub_url: front.url, hub_pin: front.pin, token });
    const row = page.getByRole('table', { name: 'Enrollment tokens' }).getByRole('row').filter({ hasText: TERMINAL });
    await row.getByText('live', { exact: true }).waitFor();
    const { tokens } = await hub.get('/peer/enrollment-tokens');
    assert.deepEqual(tokens.map((t) => [t.name, t.state, t.prefixes]), [[TERMINAL, 'live', [PREFIX]]]);
    assert.ok(!JSON.stringify(tokens).includes(token), 'the list never shows the token');
  });

  await steps.run("the terminal's admin joins the hub: a wrong pin changes nothing, the right one joins", async () => {
    const { page } = terminal;
    await page.getByRole('navigation', { name: 'Main navigation' }).getByRole('link', { name: 'System settings', exact: true }).click();
    const form = page.getByRole('form', { name: 'Join a hub' });
    await form.getByLabel('Hub URL').fill(joinFile.hub_url);
    await form.getByLabel('Hub pin').fill(`sha256:${'0'.repeat(64)}`);
    await form.getByLabel('Enrollment token').fill(joinFile.token);
    const versionsBefore = (await terminal.get('/versions')).total;
    await form.getByRole('button', { name: 'Join the hub' }).click();
    await form.getByText(new RegExp(front.pin.slice(7, 30))).waitFor(); // the API names the pin it saw
    assert.equal((await terminal.get('/versions')).total, versionsBefore, 'nothing stored at the terminal');
    assert.equal((await terminal.get('/managed/status')).managed, false);
    await form.getByLabel('Hub pin').fill(joinFile.hub_pin);
    await form.getByRole('button', { name: 'Join the hub' }).click();
    await page.getByTestId('managed-status').getByText(`Managed from the hub ${front.url} as ${TERMINAL}`).waitFor();
    await page.getByTestId('managed-banner').getByText(`Managed from the hub ${front.url} as ${TERMINAL}`).waitFor();
    const desired = await terminal.get('/config');
    assert.equal(desired.config.role, 'terminal');
    assert.equal(desired.config.peer.enabled, true);
    assert.equal(desired.author, `hub ${front.url}`);
  });

  await steps.run("the hub lists it: the token used, its page shows it managed and its first report", async () => {
    const { page } = hub;
    await page.getByRole('table', { name: 'Enrollment tokens' }).getByRole('row').filter({ hasText: TERMINAL }).getByText('used', { exact: true }).waitFor();
    await page.getByRole('table', { name: 'Enrolled terminals' }).locator(`tr[data-terminal="${TERMINAL}"]`).getByRole('link', { name: TERMINAL }).click();
    await page.getByRole('heading', { level: 2, name: `Terminal ${TERMINAL}` }).waitFor();
    const report = page.getByRole('region', { name: 'Its report' });
    await report.getByText('managed from here').waitFor();
    await report.getByText('healthy', { exact: true }).waitFor();
    await report.locator('[data-figure="Last report"]').filter({ hasNotText: 'never' }).waitFor();
    await report.locator('[data-figure="Running revision"]').filter({ hasText: /^v\d+$/ }).waitFor();
    await page.getByText('No version was made for it yet.').waitFor();
  });

  let made;
  await steps.run('bad sections: the schema names them before sending, the API refuses the rest; nothing is stored', async () => {
    const { page } = hub;
    const form = page.getByRole('form', { name: 'New config version' });
    await form.getByLabel(/^Sections/).fill(JSON.stringify({ quic: 'sometimes' }));
    await form.getByRole('button', { name: 'Review…' }).click();
    await form.getByText(/^quic: must be one of pass, fallback/).waitFor();
    assert.equal(await page.getByRole('dialog').count(), 0);
    // Well-formed, but a rule between fields the API checks: shaping on needs a rate.
    await form.getByLabel(/^Sections/).fill(JSON.stringify({ shaping: { enabled: true, rate_bps: 0 } }));
    await form.getByRole('button', { name: 'Review…' }).click();
    const dialog = page.getByRole('dialog', { name: `Send a version to ${TERMINAL}?` });
    await dialog.getByRole('button', { name: `Send to ${TERMINAL}` }).click();
    await dialog.getByText('The hub refused this version: nothing was stored').waitFor();
    await dialog.getByText(/required when shaping is enabled/).first().waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'detached' });
    assert.deepEqual((await hub.get(`/peer/terminals/${TERMINAL}/versions`)).versions, []);
    await page.getByText('No version was made for it yet.').waitFor();
  });

  await steps.run("the hub's operator posts a version: its sections named first, then it is sent and reported applied", async () => {
    const { page } = hub;
    await page.getByRole('form', { name: VERSION_FORM }).getByLabel(/^Sections/).fill('');
    const dialog = await reviewQuicPass(page, TERMINAL, 'site A: QUIC passes');
    assert.equal((await dialog.getByRole('list', { name: 'Sections this version sets' }).getByRole('listitem').count()), 1);
    await dialog.getByRole('button', { name: `Send to ${TERMINAL}` }).click();
    await dialog.waitFor({ state: 'detached' });
    const [v] = (await hub.get(`/peer/terminals/${TERMINAL}/versions`)).versions;
    made = v;
    assert.deepEqual([v.sections, v.comment, v.created_by], [['quic'], 'site A: QUIC passes', 'admin']);
    const row = page.getByRole('table', { name: 'Its config versions' }).locator(`tr[data-version="${v.id}"]`);
    await row.getByText('applied', { exact: true }).waitFor();
    const detail = await hub.get(`/peer/terminals/${TERMINAL}`);
    assert.equal(detail.applied_version_id, v.id);
    if (shotsDir) await page.screenshot({ path: join(shotsDir, 'managed-terminal.png'), fullPage: true });
  });

  await steps.run("the terminal runs it: its dashboard shows the hub's version applied and active in its history", async () => {
    const { page } = terminal;
    await page.getByTestId('managed-banner').getByText(`Hub version ${made.id}: applied.`, { exact: false }).waitFor();
    await page.getByRole('navigation', { name: 'Main navigation' }).getByRole('link', { name: 'Config history', exact: true }).click();
    const row = page.getByRole('table', { name: 'Config versions' }).getByRole('row').filter({ hasText: `hub version ${made.id}: site A: QUIC passes` });
    await row.getByText('hub', { exact: true }).waitFor();
    await row.getByText('active', { exact: true }).waitFor();
    const running = await until('the terminal running the hub version', async () => {
      const r = await terminal.get('/config/running');
      return r.config?.quic === 'pass' ? r : null;
    });
    const desired = await terminal.get('/config');
    assert.equal(desired.config.quic, 'pass');
    assert.equal(running.version_id, desired.id);
    const status = await terminal.get('/managed/status');
    assert.deepEqual([status.hub_version_id, status.outcome, status.last_error], [made.id, 'applied', null]);
    if (shotsDir) await page.screenshot({ path: join(shotsDir, 'managed-terminal-history.png'), fullPage: true });
  });
  ok = steps.summary();
} catch (e) {
  await steps.run('start the two ends and their browsers', () => {
    throw e;
  });
  ok = steps.summary();
} finally {
  for (const c of contexts) await c.close().catch(() => {});
  await front?.stop();
  await stopAll();
  finishWorkDir(tmp, ok);
}
process.exit(ok ? 0 : 1);
