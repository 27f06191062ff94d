/* global document -- used inside functions that run in the page */
// What a person does with the dashboard, step by step; screenshots of every page on the way.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { operatorSteps } from './operator.mjs';
import { satelliteSteps } from './satellite.mjs';

const PAGES = [
  { nav: 'Overview', heading: 'Overview', shot: 'overview' },
  { nav: 'Flows', heading: 'Flows', shot: 'flows' },
  { nav: 'Policy', heading: 'Policy', shot: 'policy' },
  { nav: 'IPsec bypass', heading: 'IPsec bypass', shot: 'bypass' },
  { nav: 'BoD tuning', heading: 'BoD tuning', shot: 'bod' },
  { nav: 'Cache', heading: 'Cache', shot: 'cache' },
  { nav: 'DNS', heading: 'DNS', shot: 'dns' },
  { nav: 'Config history', heading: 'Config history', shot: 'history' },
  { nav: 'Users and roles', heading: 'Users and roles', shot: 'users' },
  { nav: 'Audit log', heading: 'Audit log', shot: 'audit' },
  { nav: 'Backup and restore', heading: 'Backup and restore', shot: 'backup' },
  { nav: 'System settings', heading: 'System settings', shot: 'system' },
  { nav: 'System health', heading: 'System health', shot: 'health' },
];

/** Waits until no loader is shown (SSE keeps the network busy, so network-idle never comes). */
async function settled(page) {
  await page.waitForFunction(() => !document.querySelector('[role="status"] .mantine-Loader-root, .mantine-Skeleton-root'));
  await page.waitForTimeout(300);
}

export async function dashboardSteps(steps, { context, baseUrl, user, password, newPassword, minFlows, shotsDir, failDir }) {
  const page = context.pages()[0] ?? (await context.newPage());
  steps.onFailure = (name) => page.screenshot({ path: join(failDir, `failed-${name.replace(/[^a-z0-9]+/gi, '-')}.png`) });
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  const shot = async (name) => {
    if (shotsDir) await page.screenshot({ path: join(shotsDir, `${name}.png`), fullPage: true });
  };
  const heading = (name) => page.getByRole('heading', { level: 2, name, exact: true });
  const versionRows = () => page.getByRole('table', { name: 'Config versions' }).getByRole('row').filter({ has: page.getByRole('cell') });
  const gotoNav = async (name) => {
    await page.getByRole('navigation', { name: 'Main navigation' }).getByRole('link', { name, exact: true }).click();
  };

  await steps.run('unauthenticated visit lands on the login page', async () => {
    await page.goto(`${baseUrl}/flows`);
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    await shot('login');
  });

  await steps.run('a wrong password is refused with a message', async () => {
    await page.getByLabel('Username').fill(user);
    await page.getByLabel('Password').fill('not-the-password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: /wrong username or password/i }).waitFor();
  });

  let forced = false;
  await steps.run('log in with the one-time password', async () => {
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL((u) => !u.pathname.startsWith('/login'));
    forced = new URL(page.url()).pathname === '/change-password';
  });

  if (forced) {
    await steps.run('the forced password change blocks other pages until done', async () => {
      await page.getByRole('heading', { name: 'Choose a new password' }).waitFor();
      await page.goto(`${baseUrl}/policy`);
      await page.getByRole('heading', { name: 'Choose a new password' }).waitFor();
      await shot('change-password');
    });
    await steps.run('choose a new password', async () => {
      await page.getByLabel('Current password').fill(password);
      await page.getByLabel(/^New password/).fill(newPassword);
      await page.getByLabel('Confirm new password').fill(newPassword);
      await page.getByRole('button', { name: 'Save password' }).click();
      await heading('Overview').waitFor();
    });
  }

  await steps.run('the live stream connects', async () => {
    await page.getByRole('status').filter({ hasText: 'Live' }).first().waitFor();
  });

  for (const p of PAGES) {
    await steps.run(`page: ${p.heading}`, async () => {
      await gotoNav(p.nav);
      await heading(p.heading).waitFor();
      if (p.shot === 'flows' && minFlows > 0) {
        await page.waitForFunction((n) => {
          const el = document.querySelector('[data-testid="flow-count"]');
          const m = el?.textContent?.match(/of ([\d,]+) flows/);
          return m && Number(m[1].replace(/,/g, '')) >= n;
        }, minFlows);
      }
      await settled(page);
      if (p.shot === 'flows') {
        // Virtualized: only the rows in view (plus overscan) are in the DOM, however many flows there are.
        const rendered = await page.getByRole('table', { name: 'Flows' }).getByRole('row').count();
        assert.ok(rendered <= 80, `${rendered} rows rendered`);
      }
      await shot(p.shot);
    });
  }

  await steps.run('flow drill-down shows both legs over time', async () => {
    await gotoNav('Flows');
    await heading('Flows').waitFor();
    const link = page.getByRole('link', { name: /^Flow \d+ details$/ }).first();
    if ((await link.count()) === 0 && minFlows === 0) return; // no traffic on an external gateway right now
    await link.click();
    await page.getByRole('heading', { level: 2, name: /^Flow \d+/ }).waitFor();
    await page.getByText('Satellite leg', { exact: false }).first().waitFor();
    await page.waitForTimeout(2500); // a few live samples for the charts
    await settled(page);
    await shot('flow-detail');
  });

  await steps.run('closed flows history tab', async () => {
    await gotoNav('Flows');
    await page.getByRole('tab', { name: 'Closed (history)' }).click();
    await page.getByRole('table', { name: 'Closed flows' }).or(page.getByText('No closed flows recorded yet')).first().waitFor();
    await page.getByRole('tab', { name: 'Live' }).click();
    await page.getByRole('table', { name: 'Flows' }).waitFor();
  });

  await steps.run('BoD: derived values explain themselves, the profile saves', async () => {
    await gotoNav('BoD tuning');
    await heading('BoD tuning').waitFor();
    const derived = page.getByRole('table', { name: 'Derived values' });
    await derived.getByRole('row').filter({ hasText: 'sndbuf_bytes' }).filter({ hasText: '2 × window_' }).waitFor();
    await page.getByRole('button', { name: 'Save profile' }).click();
    await page.getByRole('textbox', { name: 'Profile', exact: true }).and(page.locator('[value="default"]')).waitFor();
    await page.getByRole('table', { name: 'Config changes from this profile' }).getByText('(changes)').first().waitFor();
  });

  let versionsBefore = 0;
  await steps.run('add a custom bypass rule', async () => {
    await gotoNav('Config history');
    await heading('Config history').waitFor();
    await settled(page);
    versionsBefore = await versionRows().count();
    await gotoNav('IPsec bypass');
    await heading('IPsec bypass').waitFor();
    await page.getByRole('textbox', { name: /^Rule name/ }).fill('vpn-e2e');
    await page.getByRole('textbox', { name: 'CIDRs' }).fill('203.0.113.7/32');
    await page.getByRole('textbox', { name: 'CIDRs' }).press('Enter');
    await page.getByRole('button', { name: 'Add rule' }).click();
    // Reviewed against what runs, then saved and applied.
    await page.getByLabel('Changes to review').getByText(/\(what the gateway runs\)/).waitFor();
    await page.getByRole('button', { name: 'Save and apply' }).click();
    await page.getByRole('status').filter({ hasText: /Version \d+ applied/ }).waitFor();
    await page.getByRole('cell', { name: 'vpn-e2e', exact: true }).waitFor();
  });

  await steps.run('the new version appears in the history, with its diff', async () => {
    await gotoNav('Config history');
    await heading('Config history').waitFor();
    const row = versionRows().filter({ hasText: 'add bypass vpn-e2e' });
    await row.waitFor();
    const rows = await versionRows().count();
    assert.equal(rows, versionsBefore + 1, 'one more version');
    await row.getByRole('button', { name: /^Diff/ }).click();
    await page.getByText('203.0.113.7/32').first().waitFor();
    await settled(page);
    await shot('history-diff');
  });

  await steps.run('roll back to the version before the rule', async () => {
    const target = versionRows().nth(1);
    const label = await target.getByRole('button', { name: /^Roll back to version \d+$/ }).getAttribute('aria-label');
    page.once('dialog', (d) => d.accept());
    await target.getByRole('button', { name: /^Roll back to version \d+$/ }).click();
    const id = label.match(/(\d+)$/)[1];
    await versionRows().filter({ hasText: `rollback to v${id}` }).waitFor();
    await page.getByRole('status').filter({ hasText: /Rolled back as version \d+/ }).waitFor();
    await gotoNav('IPsec bypass');
    await heading('IPsec bypass').waitFor();
    await settled(page);
    assert.equal(await page.getByRole('cell', { name: 'vpn-e2e', exact: true }).count(), 0, 'rule gone after roll back');
  });

  if (minFlows > 0) await satelliteSteps(steps, { page, baseUrl, shotsDir });

  await operatorSteps(steps, { page, baseUrl, user, password: forced ? newPassword : password, shotsDir });

  await steps.run('dark theme: toggle, screenshot, survives a reload', async () => {
    await gotoNav('Overview');
    await heading('Overview').waitFor();
    await page.getByRole('button', { name: 'Switch to dark theme' }).click();
    assert.equal(await page.locator('html').getAttribute('data-mantine-color-scheme'), 'dark');
    await page.mouse.move(600, 400); // let the toggle's tooltip go
    await page.waitForTimeout(400);
    await settled(page);
    await shot('overview-dark');
    await page.reload();
    await heading('Overview').waitFor();
    assert.equal(await page.locator('html').getAttribute('data-mantine-color-scheme'), 'dark');
    await page.getByRole('button', { name: 'Switch to light theme' }).click();
  });

  await steps.run('tablet width (768 px): navigation folds into a menu', async () => {
    await page.setViewportSize({ width: 768, height: 1024 });
    await page.getByRole('button', { name: 'Toggle navigation' }).click();
    await page.getByRole('navigation', { name: 'Main navigation' }).getByRole('link', { name: 'Flows', exact: true }).click();
    await heading('Flows').waitFor();
    await settled(page);
    await shot('flows-tablet');
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  await steps.run('log out', async () => {
    await page.getByRole('button', { name: 'Account menu' }).click();
    await page.getByRole('menuitem', { name: 'Log out' }).click();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
  });

  await steps.run('no uncaught errors in the page', async () => {
    assert.deepEqual(pageErrors, []);
  });
}
