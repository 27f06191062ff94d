/* global document, window -- used inside functions that run in the page */
// The workflows an operator performs, end to end in the browser against the real API: a class added and edited in
// place, a bypass rule whose risks are named and confirmed, BoD settings derived and written (a refused value named
// at once), a system setting changed; each while other versions are pending, each made against what the gateway runs
// (the pending versions named, left out and kept in the history); API tokens created and revoked, and a viewer's
// session offering nothing a viewer may not do. Runs after the dashboard steps, signed in as the admin.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { request } from 'playwright-core';

const VIEWER_PASSWORD = 'e2e-viewer-orbit-2026';

export async function operatorSteps(steps, { page, baseUrl, user, password, shotsDir }) {
  const heading = (name) => page.getByRole('heading', { level: 2, name, exact: true });
  const gotoNav = async (name) => {
    await page.getByRole('navigation', { name: 'Main navigation' }).getByRole('link', { name, exact: true }).click();
    await heading(name).waitFor();
  };
  const applied = () => page.getByRole('status').filter({ hasText: /Version \d+ applied/ });
  const call = async (method, path, data) => {
    // The page's own session (cookie) and its CSRF token, as the dashboard sends them.
    const csrf = (await page.context().cookies()).find((c) => c.name === 'perigee_csrf')?.value ?? '';
    const r = await page.request.fetch(`${baseUrl}${path}`, { method, data, headers: { 'X-CSRF-Token': csrf } });
    assert.ok(r.ok(), `${method} ${path}: ${r.status()} ${await r.text()}`);
    return r.json();
  };
  /** Saves a version on top of the desired one without applying it (as an API client would): a pending version. */
  const pendingClass = async (name, port) =>
    (await call('POST', '/api/v1/policy/classes', { name, priority: 900, action: 'accelerate', match: { protocol: 'tcp', dports: [port] } })).version_id;
  const runningConfig = async () => (await call('GET', '/api/v1/config/running')).config;
  /** Reviews the change against what runs (the pending versions named), then saves and applies it. */
  const reviewAndApply = async (scope, pendingId, shotName) => {
    const note = scope.getByRole('note').filter({ hasText: 'Pending versions are not in this edit' }).last();
    await note.getByText(new RegExp(`version ${pendingId} (is|are) saved but not applied`)).or(note.getByText(new RegExp(`versions \\d+–${pendingId} are saved`))).first().waitFor();
    await note.getByText(/applying one of them later would undo this change unless it is made again/).waitFor();
    await scope.getByLabel('Changes to review').getByText(/\(what the gateway runs\)/).waitFor();
    if (shotName) await shot(shotName, { fullPage: false });
    await scope.getByRole('button', { name: /(Save|Delete) and apply/ }).click();
    await applied().waitFor();
  };
  const shot = async (name, { fullPage = true } = {}) => {
    if (!shotsDir) return;
    if (fullPage) await page.evaluate(() => window.scrollTo(0, 0)); // else the sticky header is drawn mid-page
    await page.waitForTimeout(400); // transitions (a dialog opening) settle
    await page.screenshot({ path: join(shotsDir, `${name}.png`), fullPage });
  };
  const pick = async (label, option) => {
    await page.getByRole('textbox', { name: label, exact: true }).click();
    await page.getByRole('option', { name: option, exact: true }).click();
  };

  await steps.run('operator: add and edit a traffic class while a version is pending: made to what runs', async () => {
    const pending = await pendingClass('pending-e2e', '9090');
    await gotoNav('Policy');
    // The page lists what runs: the pending class is not there.
    await page.getByRole('note').filter({ hasText: 'Pending versions are not in this edit' }).waitFor();
    assert.equal(await page.getByRole('cell', { name: 'pending-e2e', exact: true }).count(), 0);
    await page.getByRole('button', { name: 'Add class' }).click();
    let dialog = page.getByRole('dialog');
    await dialog.getByLabel(/^Name/).fill('e2e-web');
    await dialog.getByLabel('Destination ports').fill('8080');
    await dialog.getByLabel('Destination ports').press('Enter');
    await dialog.getByRole('button', { name: 'Review changes' }).click();
    await reviewAndApply(dialog, pending, 'policy-review');
    await page.getByRole('button', { name: 'Edit class e2e-web' }).click();
    dialog = page.getByRole('dialog');
    await pick('Satellite congestion control', 'bbr');
    await dialog.getByRole('button', { name: 'Review changes' }).click();
    await dialog.getByLabel('Changes to review').getByText('bbr').first().waitFor();
    await dialog.getByRole('button', { name: 'Save and apply' }).click();
    await dialog.waitFor({ state: 'hidden' });
    await applied().waitFor();
    const row = page.getByRole('row').filter({ has: page.getByRole('cell', { name: 'e2e-web', exact: true }) });
    await row.getByRole('cell', { name: 'bbr', exact: true }).waitFor();
    // What runs has the edit and not the pending class; the pending version is still in the history as it was.
    const runs = await runningConfig();
    assert.deepEqual(runs.classes.map((c) => c.name), ['e2e-web']);
    const kept = await call('GET', `/api/v1/versions/${pending}`);
    assert.deepEqual(kept.config.classes.map((c) => c.name), ['pending-e2e']);
  });

  await steps.run('operator: a bypass rule covering the served subnet is named before it is added', async () => {
    const pending = await pendingClass('pending-e2e-2', '9091');
    await gotoNav('IPsec bypass');
    await page.getByRole('textbox', { name: /^Rule name/ }).fill('lan-all');
    await page.getByRole('textbox', { name: 'CIDRs' }).fill('10.71.1.0/24');
    await page.getByRole('textbox', { name: 'CIDRs' }).press('Enter');
    await page.getByRole('button', { name: 'Add rule' }).click();
    const dialog = page.getByRole('dialog', { name: 'Check this rule before it is added' });
    await dialog.getByText(/all of the served subnet 10\.71\.1\.0\/24/).waitFor();
    await shot('bypass-confirm', { fullPage: false });
    assert.equal(await page.getByRole('cell', { name: 'lan-all', exact: true }).count(), 0, 'nothing stored before confirming');
    await dialog.getByRole('button', { name: 'Add it anyway' }).click();
    await reviewAndApply(page, pending, 'bypass-review');
    await page.getByRole('cell', { name: 'lan-all', exact: true }).waitFor();
    assert.ok(!(await runningConfig()).classes.some((c) => c.name === 'pending-e2e-2'), 'the pending class was applied with the rule');
    // Every protocol the gateway accepts, ICMP included.
    await page.getByRole('textbox', { name: /^Rule name/ }).fill('ping-e2e');
    await page.getByRole('textbox', { name: 'CIDRs' }).fill('203.0.113.9/32');
    await page.getByRole('textbox', { name: 'CIDRs' }).press('Enter');
    await pick('Protocol', 'icmp');
    await page.getByRole('button', { name: 'Add rule' }).click();
    await page.getByRole('button', { name: 'Save and apply' }).click();
    await page.getByRole('row').filter({ hasText: 'ping-e2e' }).getByRole('cell', { name: 'icmp', exact: true }).waitFor();
  });

  await steps.run('operator: BoD names a value the config refuses, then derives and writes the settings', async () => {
    await gotoNav('BoD tuning');
    const rtt = page.getByRole('textbox', { name: 'Base RTT (ms)' });
    await rtt.fill('60000');
    // Said once, under the field, with what is allowed.
    await page.getByText('must be at most 10,000', { exact: true }).waitFor();
    assert.equal(await page.getByText(/base RTT \(ms\): must be at most/).count(), 0, 'the message is not repeated above');
    await rtt.fill('600');
    const forward = page.getByRole('textbox', { name: 'Forward rate (bit/s)' });
    await forward.fill('100000000000');
    await page.getByText(/beyond any satellite carrier/).first().waitFor();
    await page.getByRole('button', { name: 'Save, write to config and apply' }).click();
    const dialog = page.getByRole('dialog', { name: 'Write these values to the config and apply them?' });
    await dialog.getByText(/100 Gbit\/s is beyond any satellite carrier/).waitFor();
    await dialog.getByRole('button', { name: 'Change the inputs' }).click();
    await forward.fill('50000000');
    await page.waitForFunction(() => !document.body.textContent.includes('beyond any satellite carrier'));
    const pending = await pendingClass('pending-e2e-3', '9092');
    await page.getByRole('note').filter({ hasText: `version ${pending} is saved but not applied` }).waitFor();
    await page.getByRole('heading', { name: 'Change to what the gateway runs' }).waitFor();
    await page.getByRole('button', { name: 'Save, write to config and apply' }).click();
    await applied().waitFor();
    const runs = await runningConfig();
    assert.ok(runs.satellite.pacing_rate_bps > 0 && !runs.classes.some((c) => c.name === 'pending-e2e-3'), JSON.stringify(runs.satellite));
  });

  await steps.run('operator: a system setting changed with versions pending edits what runs', async () => {
    await call('POST', '/api/v1/policy/bypass', { name: 'pending-rule', protocol: 'tcp', cidrs: ['203.0.113.44/32'], ports: ['8443'] });
    await gotoNav('System settings');
    await page.getByText('Pending versions are not in this form').waitFor();
    const idle = page.getByRole('textbox', { name: /^Idle timeout/ });
    await idle.fill('900');
    await page.getByRole('button', { name: 'Review changes' }).click();
    const review = page.getByLabel('Changes to review');
    await review.getByText(/\(what the gateway runs\)/).waitFor();
    const text = await review.textContent();
    assert.ok(text.includes('idle_timeout_s'), text);
    assert.ok(!text.includes('pending-rule') && !text.includes('pending-e2e'), `pending changes in the review: ${text}`);
    await shot('system-pending');
    await page.getByRole('button', { name: 'Save and apply' }).click();
    await page.getByRole('status').filter({ hasText: /Version \d+ applied/ }).waitFor();
    // What runs now is what ran plus the timeout: the pending bypass rule was not applied along with it.
    await gotoNav('IPsec bypass');
    await page.getByRole('cell', { name: 'ipsec-esp', exact: true }).waitFor();
    await page.getByRole('cell', { name: 'lan-all', exact: true }).waitFor();
    assert.equal(await page.getByRole('cell', { name: 'pending-rule', exact: true }).count(), 0);
  });

  await steps.run('operator: create an API token, see its secret once, revoke it', async () => {
    await gotoNav('API tokens');
    await page.getByRole('textbox', { name: /^Token name/ }).fill('grafana e2e');
    await page.getByRole('button', { name: 'Create token' }).click();
    const secret = await page.getByLabel('New token secret').textContent();
    assert.ok(secret && secret.length > 20, secret);
    // The secret works as a bearer token for reads (a client of its own: no session cookie).
    const client = await request.newContext();
    const asToken = () => client.get(`${baseUrl}/api/v1/policy/classes`, { headers: { authorization: `Bearer ${secret.trim()}` } });
    assert.equal((await asToken()).status(), 200);
    await shot('tokens');
    page.once('dialog', (d) => d.accept());
    await page.getByRole('button', { name: 'Revoke token grafana e2e' }).click();
    await page.getByText('No API tokens').waitFor();
    assert.equal((await asToken()).status(), 401);
    await client.dispose();
  });

  let viewerPassword = '';
  await steps.run('admin: add a viewer', async () => {
    await gotoNav('Users and roles');
    await page.getByRole('textbox', { name: /^Username/ }).fill('vera');
    await pick('Role', 'viewer: read only');
    await page.getByRole('button', { name: 'Add user' }).click();
    const shown = page.getByRole('status').filter({ hasText: 'One-time password for vera' });
    viewerPassword = (await shown.locator('code').textContent()).trim();
    assert.ok(viewerPassword.length >= 12);
  });

  const signIn = async (name, secret) => {
    await page.getByRole('button', { name: 'Account menu' }).click();
    await page.getByRole('menuitem', { name: 'Log out' }).click();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    await page.getByLabel('Username').fill(name);
    await page.getByLabel('Password').fill(secret);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL((u) => !u.pathname.startsWith('/login'));
  };

  await steps.run("viewer: the session offers no writes and every page a viewer may read", async () => {
    await signIn('vera', viewerPassword);
    await page.getByRole('heading', { name: 'Choose a new password' }).waitFor();
    await page.getByLabel('Current password').fill(viewerPassword);
    await page.getByLabel(/^New password/).fill(VIEWER_PASSWORD);
    await page.getByLabel('Confirm new password').fill(VIEWER_PASSWORD);
    await page.getByRole('button', { name: 'Save password' }).click();
    await heading('Overview').waitFor();
    const nav = page.getByRole('navigation', { name: 'Main navigation' });
    for (const hidden of ['Users and roles', 'Audit log', 'Backup and restore', 'API tokens']) {
      assert.equal(await nav.getByRole('link', { name: hidden, exact: true }).count(), 0, `${hidden} offered to a viewer`);
    }
    const none = async (role, name) => assert.equal(await page.getByRole(role, { name }).count(), 0, `${name} offered to a viewer`);
    await gotoNav('Policy');
    await page.getByRole('cell', { name: 'e2e-web', exact: true }).or(page.getByText('No traffic classes')).first().waitFor();
    await none('button', 'Add class');
    await none('button', /^Edit class/);
    await gotoNav('IPsec bypass');
    await page.getByRole('cell', { name: 'ipsec-esp', exact: true }).waitFor();
    await none('button', 'Add rule');
    await gotoNav('Config history');
    await page.getByRole('table', { name: 'Config versions' }).waitFor();
    await none('button', /^Roll back to version/);
    await none('button', /^Apply version/);
    await none('button', /^Dry run version/);
    await gotoNav('Cache');
    await none('button', 'Purge everything');
    await gotoNav('DNS');
    await none('button', 'Flush everything');
    await gotoNav('BoD tuning');
    await page.getByRole('table', { name: 'Derived values' }).waitFor();
    await none('button', 'Save and write to config');
    await page.goto(`${baseUrl}/users`);
    await page.getByText('Needs role admin').waitFor();
    await shot('viewer-users');
    await page.goto(`${baseUrl}/backup`);
    await page.getByText('Needs role admin').waitFor();
  });

  await steps.run('admin signs in again', async () => {
    await signIn(user, password);
    await gotoNav('Overview');
  });
}
