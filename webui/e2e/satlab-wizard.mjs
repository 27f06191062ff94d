#!/usr/bin/env node
// The first-login wizard against the REAL gateway: satlab (profile geo-hts, 600 ms RTT) with the splitter
// daemon in the hub started WITHOUT a config, a fresh API on its control socket, the built dashboard,
// Debian's Chromium via playwright-core. The box is configured only through the wizard; then a download
// from the client must be split by the hub with Hybla on the satellite leg. Needs root (namespaces); run it
// under the tests lock. Always tears everything down.
//   node e2e/satlab-wizard.mjs   (make -C webui test-wizard; prefix SATLAB_WIZARD_PREFIX, default uw-)
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { needsRoot, stopAll, until } from './harness.mjs';
import { finishWorkDir, launchBrowser, makeWorkDir, repo, startApi, startWebServer } from './dashboard-stack.mjs';
import { Steps } from './steps.mjs';
import { BULK_PORT, Lab, SERVER } from './lab.mjs';

const PROFILE = 'geo-hts';
const NEW_PASSWORD = 'wizard-e2e-passphrase-42';
needsRoot('the wizard browser suite');
const tmp = makeWorkDir('perigee-e2e-wizard-');
const lab = new Lab(repo, process.env.SATLAB_WIZARD_PREFIX ?? 'uw-');
const satLeg = (f) => f.legs?.[f.legs?.satellite];


let context;
let tornDown;
function teardown() {
  tornDown ??= (async () => {
    const keepAlive = setInterval(() => {}, 1000);
    await Promise.race([context?.close().catch(() => {}), new Promise((r) => setTimeout(r, 10000))]);
    await stopAll();
    await lab.down().catch((e) => console.log(`e2e: satlab down failed: ${e.message}`));
    clearInterval(keepAlive);
  })();
  return tornDown;
}
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.once(sig, async () => {
    await teardown();
    process.exit(130);
  });
}

const steps = new Steps();
let ok = false;
const t0 = Date.now();
try {
  let page;
  let password;
  await steps.run(`satlab ${lab.prefix} up (${PROFILE}), hub gateway WITHOUT a config, fresh API, dashboard, browser`, async () => {
    console.log(`    ${(await lab.up(PROFILE, { unconfigured: true })).trim()}`);
    const health = await lab.gateway('/v1/health');
    assert.equal(health.config_revision, null, 'the gateway starts with no config');
    const backend = await startApi(tmp, { socket: lab.socket });
    const baseUrl = await startWebServer(tmp, backend.apiUrl);
    password = backend.password;
    context = await launchBrowser(tmp, { handleSIGINT: false, handleSIGTERM: false, handleSIGHUP: false });
    page = context.pages()[0] ?? (await context.newPage());
    steps.onFailure = (name) => page.screenshot({ path: join(tmp, `failed-${name.replace(/[^a-z0-9]+/gi, '-')}.png`), fullPage: true });
    await page.goto(`${baseUrl}/login`);
  });

  await steps.run('first login: the one-time password, a new one, then the setup wizard (not the overview)', async () => {
    await page.getByLabel('Username').fill('admin');
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Choose a new password' }).waitFor();
    await page.getByLabel('Current password').fill(password);
    await page.getByLabel(/^New password/).fill(NEW_PASSWORD);
    await page.getByLabel('Confirm new password').fill(NEW_PASSWORD);
    await page.getByRole('button', { name: 'Save password' }).click();
    await page.getByRole('heading', { name: 'Set up this gateway' }).waitFor();
    assert.equal(new URL(page.url()).pathname, '/setup');
  });

  await steps.run('role hub; interfaces picked from the list the gateway read from the kernel', async () => {
    await page.getByText('hub (at the teleport)').click();
    await page.getByRole('button', { name: 'Next' }).click();
    const sat = page.getByRole('textbox', { name: /Satellite interface/ });
    await sat.click();
    // The option carries the address the kernel reports for sat0 in the hub's namespace.
    await page.getByRole('option', { name: /^sat0 — 10\.71\.2\.\d+\/\d+/ }).click();
    assert.match(await sat.inputValue(), /^sat0 — 10\.71\.2\./);
    const lan = page.getByRole('textbox', { name: /LAN interfaces/ });
    if (!(await page.getByText(/^lan0 — /).count())) {
      await lan.click();
      await page.getByRole('option', { name: /^lan0 — / }).click();
    }
    await page.getByRole('button', { name: 'Next' }).click();
  });

  await steps.run('served subnets and the routes across the satellite', async () => {
    await page.getByRole('textbox', { name: /Served subnets/ }).fill('10.71.1.0/24\nfd71:1::/64');
    await page.getByRole('textbox', { name: /Routes across the satellite/ }).fill('10.71.1.0/24 via 10.71.2.1\nfd71:1::/64 via fd71:2::1');
    await page.getByRole('button', { name: 'Next' }).click();
  });

  await steps.run('Hybla on the satellite leg, cubic on the terrestrial one, cache off; review the diff; apply', async () => {
    assert.equal(await page.getByRole('textbox', { name: /^Satellite leg/ }).inputValue(), 'hybla_ld');
    await page.getByRole('textbox', { name: /^Terrestrial leg/ }).click();
    await page.getByRole('option', { name: 'cubic' }).click();
    await page.getByRole('button', { name: 'Next' }).click();
    await page.getByRole('button', { name: 'Review changes' }).click();
    // The API's proposal names no network (a placeholder served subnet, no routes): the diff shows what the wizard
    // typed, and the terrestrial leg it changed.
    const diff = page.getByRole('table', { name: 'Differences' });
    await diff.getByRole('row').filter({ hasText: '$.terrestrial.congestion_control' }).filter({ hasText: 'cubic' }).waitFor();
    await diff.getByRole('row').filter({ hasText: '$.served_subnets' }).filter({ hasText: '10.71.1.0/24' }).first().waitFor();
    await page.getByRole('button', { name: 'Apply this config' }).click();
    await page.getByText('The gateway is set up').waitFor();
  });

  await steps.run('the gateway runs the version the wizard made, and the API says so', async () => {
    const health = await until('the gateway to report the new config', async () => {
      const h = await lab.gateway('/v1/health');
      return h.config_revision ? h : null;
    });
    assert.equal(health.role, 'hub');
    assert.match(health.config_revision, /^v\d+$/);
    const running = await page.evaluate(async () => (await fetch('/api/v1/config/running')).json());
    assert.equal(running.in_sync, true, `API running view: ${JSON.stringify(running)}`);
    assert.equal(`v${running.version_id}`, health.config_revision);
    const cfg = await lab.gateway('/v1/config');
    assert.deepEqual(cfg.interfaces, { lan: ['lan0'], satellite: 'sat0' });
    assert.equal(cfg.satellite.congestion_control, 'hybla_ld');
    assert.equal(cfg.terrestrial.congestion_control, 'cubic');
  });

  await steps.run('a download from the client is split at the hub, Hybla on the satellite leg', async () => {
    const seen = [];
    let done = false;
    const download = lab.bulkGet('8M').finally(() => (done = true));
    while (!done) {
      const { flows } = await lab.gateway('/v1/flows');
      seen.push(...flows.filter((f) => f.server === `${SERVER}:${BULK_PORT}` && satLeg(f)?.state));
      await new Promise((r) => setTimeout(r, 300));
    }
    const result = await download;
    assert.equal(result.complete, true, 'the download completed');
    assert.ok(seen.length > 0, 'the hub listed the flow while it ran');
    const ground = (f) => f.legs[f.legs.satellite === 'client' ? 'server' : 'client'];
    const odd = seen.find((f) => f.action !== 'accelerate' || satLeg(f).cc !== 'hybla_ld' || ground(f).cc !== 'cubic');
    assert.equal(odd, undefined, `a sample not split with hybla: ${JSON.stringify(odd)}`);
    console.log(`    flow ${seen[0].id}: ${seen.length} samples, satellite leg ${satLeg(seen[0]).cc}, ${(result.goodput_bps / 1e6).toFixed(1)} Mbit/s goodput`);
  });
  ok = steps.summary();
} catch (e) {
  console.log(`e2e: ${e.stack ?? e}`);
} finally {
  await teardown();
  finishWorkDir(tmp, ok);
}
console.log(`e2e wizard: ${ok ? 'passed' : 'FAILED'} in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
process.exit(ok ? 0 : 1);
