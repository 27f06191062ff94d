#!/usr/bin/env node
/* global document -- used inside functions that run in the page */
// End-to-end: a new box as the package, the image and the VM deliver it. The fake gateway (perigee_fakes) runs the
// packaged factory config (debian/conf/gateway.json: it serves nobody), so the appliance "runs" but is not set up:
// the admin's first login lands on the setup wizard, a viewer is told an operator must run it, and the config the
// wizard applies ends that. No namespaces, no root.
//   node e2e/first-boot.mjs
// Knobs as e2e/run.mjs: PERIGEE_E2E_KEEP, PERIGEE_E2E_BUILD.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { stopAll } from './harness.mjs';
import { finishWorkDir, firstLogin, launchBrowser, makeWorkDir, startApi, startFakeGateway, startWebServer } from './dashboard-stack.mjs';
import { Steps } from './steps.mjs';

const NEW_PASSWORD = 'e2e-Perigee-first-boot-2026';
const VIEWER = { username: 'vera', password: 'e2e-viewer-passphrase-7' };
const NOT_SET_UP = 'This appliance is not set up yet';

const tmp = makeWorkDir('perigee-e2e-first-boot-');
const steps = new Steps();
let context;
let ok = false;
try {
  let baseUrl;
  let password;
  await steps.run('fake gateway on the factory config, API, dashboard, browser', async () => {
    const socket = await startFakeGateway(tmp, { flows: 0, env: { PERIGEE_E2E_BOOT: 'factory' } });
    const backend = await startApi(tmp, { socket });
    baseUrl = await startWebServer(tmp, backend.apiUrl);
    password = backend.password;
    context = await launchBrowser(tmp);
  });
  const page = context ? (context.pages()[0] ?? (await context.newPage())) : null;
  if (page) steps.onFailure = (name) => page.screenshot({ path: join(tmp, `failed-${name.replace(/[^a-z0-9]+/gi, '-')}.png`), fullPage: true });
  const running = () => page.evaluate(async () => (await fetch('/api/v1/config/running')).json());
  const notSetUp = () => page.getByRole('status').filter({ hasText: NOT_SET_UP });
  const signIn = async (user, pw) => {
    await page.getByLabel('Username').fill(user);
    await page.getByLabel('Password').fill(pw);
    await page.getByRole('button', { name: 'Sign in' }).click();
  };
  // Logged out, then back at the landing page: the next login starts from "/", not from the page left.
  const logOut = async () => {
    await page.getByRole('button', { name: 'Account menu' }).click();
    await page.getByRole('menuitem', { name: 'Log out' }).click();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    await page.goto(`${baseUrl}/`);
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
  };

  await steps.run('first login: the one-time password, a new one, then the setup wizard (not the overview)', async () => {
    await firstLogin(page, `${baseUrl}/`, { password, newPassword: NEW_PASSWORD, landsOn: 'Set up this gateway' });
    assert.equal(new URL(page.url()).pathname, '/setup');
    const r = await running();
    assert.equal(r.revision, 'factory-default', JSON.stringify(r));
    assert.equal(r.in_sync, true, 'the factory config is imported as the active version');
    assert.equal(r.needs_setup, true);
  });

  await steps.run('a viewer stays on the overview, told the appliance is not set up and an operator must run the setup', async () => {
    const created = await page.evaluate(async (body) => {
      const token = decodeURIComponent(document.cookie.match(/(?:^|; )perigee_csrf=([^;]*)/)?.[1] ?? '');
      const res = await fetch('/api/v1/users', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': token },
        body: JSON.stringify({ ...body, role: 'viewer' }),
      });
      return res.status;
    }, VIEWER);
    assert.equal(created, 201);
    await logOut();
    await signIn(VIEWER.username, VIEWER.password);
    await page.getByRole('heading', { level: 2, name: 'Overview', exact: true }).waitFor();
    const banner = notSetUp();
    await banner.getByText(/runs the factory config \(revision factory-default\): it serves no client/).waitFor();
    await banner.getByText(/An operator or admin must run the setup wizard/).waitFor();
    assert.equal(await banner.getByRole('link', { name: 'Open the setup wizard' }).count(), 0);
    assert.equal(new URL(page.url()).pathname, '/');
    await logOut();
  });

  await steps.run('the admin logs in again and lands on the wizard again', async () => {
    await signIn('admin', NEW_PASSWORD);
    await page.getByRole('heading', { name: 'Set up this gateway' }).waitFor();
    assert.equal(new URL(page.url()).pathname, '/setup');
  });

  await steps.run('the wizard: role, the interfaces the gateway lists, networks, the satellite leg; applied', async () => {
    await page.getByText('hub (at the teleport)').click();
    await page.getByRole('button', { name: 'Next' }).click();
    const sat = page.getByRole('textbox', { name: /Satellite interface/ });
    if (!/^sat0 — /.test(await sat.inputValue())) {
      await sat.click();
      await page.getByRole('option', { name: /^sat0 — / }).click();
    }
    if (!(await page.getByText(/^lan0 — /).count())) {
      await page.getByRole('textbox', { name: /LAN interfaces/ }).click();
      await page.getByRole('option', { name: /^lan0 — / }).click();
    }
    await page.getByRole('button', { name: 'Next' }).click();
    await page.getByRole('textbox', { name: /Served subnets/ }).fill('10.71.1.0/24');
    await page.getByRole('textbox', { name: /Routes across the satellite/ }).fill('10.71.1.0/24 via 10.71.2.2');
    await page.getByRole('button', { name: 'Next' }).click();
    await page.getByRole('button', { name: 'Next' }).click();
    await page.getByRole('button', { name: 'Review changes' }).click();
    await page.getByRole('button', { name: 'Apply this config' }).click();
    await page.getByText('The gateway is set up').waitFor();
  });

  await steps.run('set up: the overview stays the overview, and nothing says the box is not set up', async () => {
    await page.getByRole('link', { name: 'Go to the overview' }).click();
    await page.getByRole('heading', { level: 2, name: 'Overview', exact: true }).waitFor();
    const r = await running();
    assert.equal(r.needs_setup, false, JSON.stringify(r));
    assert.equal(r.in_sync, true);
    assert.notEqual(r.revision, 'factory-default');
    // A later visit to the landing page is not sent to the wizard either.
    await page.goto(`${baseUrl}/`);
    await page.getByRole('heading', { level: 2, name: 'Overview', exact: true }).waitFor();
    await page.waitForTimeout(1000);
    assert.equal(new URL(page.url()).pathname, '/');
    assert.equal(await notSetUp().count(), 0);
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
