#!/usr/bin/env node
// End-to-end: the Fleet page over a 3-gateway hub cluster in satlab (geo-hts, prefix uf-). The API runs on
// this host with gw1 as its local gateway (Unix socket); gw2 and gw3 are registered by address, enrolled with
// the credentials the API issued (`satlab cluster enroll`: a management link and the daemon's mutual-TLS
// control listener), and one config version is applied to all three. The page must show each gateway
// healthy on that revision with both of its BGP sessions (toward the hub and the edge router) Established
// and BFD up, as the FRR beside it reports them, and live flows while a transfer crosses the cluster. Needs
// root.
//   node e2e/fleet.mjs
// Knobs as e2e/satlab.mjs: PERIGEE_E2E_SCREENSHOTS, PERIGEE_E2E_KEEP, PERIGEE_E2E_BUILD, SATLAB_FLEET_PREFIX.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { needsRoot, stopAll, until as untilEvery } from './harness.mjs';
import { finishWorkDir, launchBrowser, makeWorkDir, repo, shotsDir, startApi, startWebServer } from './dashboard-stack.mjs';
import { Steps } from './steps.mjs';

const PREFIX = process.env.SATLAB_FLEET_PREFIX ?? 'uf-';
const SATLAB = join(repo, 'bin', 'satlab');
const NEW_PASSWORD = 'e2e-Perigee-fleet-2026';

function satlab(args, timeoutMs = 240000) {
  return new Promise((resolve, reject) => {
    execFile(SATLAB, ['--prefix', PREFIX, ...args], { timeout: timeoutMs, maxBuffer: 4 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`satlab ${args.join(' ')} failed: ${stderr || stdout}`));
      else resolve(stdout);
    });
  });
}

// This suite polls every 500 ms.
const until = (what, fn, opts = {}) => untilEvery(what, fn, { everyMs: 500, ...opts });

needsRoot('the fleet browser suite');
const tmp = makeWorkDir('perigee-e2e-fleet-');
const steps = new Steps();
let context;
let ok = false;
let transfer;
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
  let baseUrl;
  let password;
  await steps.run(`satlab ${PREFIX} up (geo-hts, 3 hub gateways), API on gw1, dashboard, browser`, async () => {
    await satlab(['down'], 120000);
    console.log(`    ${(await satlab(['up', '--profile', 'geo-hts', '--hub-gateways', '3', '--gateway', 'hub'])).trim()}`);
    const backend = await startApi(tmp, { socket: `/run/satlab/${PREFIX}/gw-${PREFIX}gw1.sock` });
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

  await steps.run('log in with the one-time password, forced change', async () => {
    await page.goto(`${baseUrl}/fleet`);
    await page.getByLabel('Username').fill('admin');
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Choose a new password' }).waitFor();
    await page.getByLabel('Current password').fill(password);
    await page.getByLabel(/^New password/).fill(NEW_PASSWORD);
    await page.getByLabel('Confirm new password').fill(NEW_PASSWORD);
    await page.getByRole('button', { name: 'Save password' }).click();
    await page.getByRole('heading', { level: 2, name: 'Overview', exact: true }).waitFor();
  });

  await steps.run('register gw2 and gw3 by address, enroll them with the issued credentials', async () => {
    for (const k of [2, 3]) {
      const address = `10.79.${10 + k}.2:7443`;
      const reg = await call('POST', '/fleet/gateways', { name: `gw${k}`, address });
      const file = join(tmp, `gw${k}-credentials.json`);
      writeFileSync(file, JSON.stringify(reg.credentials), { mode: 0o600 });
      const printed = (await satlab(['cluster', 'enroll', `gw${k}`, '--credentials', file])).trim();
      assert.equal(printed, address);
    }
  });

  let revision;
  await steps.run('one version applied to the fleet: a result per gateway, all applied', async () => {
    // One config for all: the satellite route via the next hop every gateway reaches (satlab cluster enroll).
    const desired = (await call('GET', '/config')).config;
    desired.satellite.routes = [{ dst: '10.71.1.0/24', via: '10.71.10.1' }];
    const change = await call('PUT', '/config', { config: desired, comment: 'the fleet: one next hop for all' });
    const res = await call('POST', `/versions/${change.version_id}/apply`, {});
    assert.equal(res.ok, true, JSON.stringify(res));
    assert.deepEqual(res.gateways.map((g) => [g.gateway, g.status]), [['local', 'applied'], ['gw2', 'applied'], ['gw3', 'applied']]);
    revision = res.revision;
  });

  await steps.run('the Fleet page: each gateway with its two BGP sessions Established and BFD up', async () => {
    await page.getByRole('navigation', { name: 'Main navigation' }).getByRole('link', { name: 'Fleet', exact: true }).click();
    const table = page.getByRole('table', { name: 'Fleet gateways' });
    await table.waitFor();
    // Gateway K peers with the hub router at 10.71.(10+K).1 and the edge router at 10.71.(20+K).1. An enrolled
    // gateway's daemon was restarted: its announcer opens the sessions again once it serves, so wait for them.
    for (const [name, k] of [['local', 1], ['gw2', 2], ['gw3', 3]]) {
      const row = table.locator(`tr[data-gateway="${name}"]`);
      for (const [router, peer] of [['hub', `10.71.${10 + k}.1`], ['edge', `10.71.${20 + k}.1`]]) {
        const session = row.locator(`[data-peer="${peer}"]`);
        await session.getByText(`${PREFIX}${router} ${peer}`, { exact: true }).waitFor();
        await session.getByText('Established', { exact: true }).waitFor();
        await session.getByText('BFD up', { exact: true }).waitFor();
      }
    }
  });

  await steps.run('the Fleet page: three healthy gateways on the active revision', async () => {
    const table = page.getByRole('table', { name: 'Fleet gateways' });
    for (const name of ['local', 'gw2', 'gw3']) {
      const row = table.locator(`tr[data-gateway="${name}"]`);
      await row.getByText('ok', { exact: true }).waitFor();
      await row.getByText(revision, { exact: true }).waitFor();
    }
    assert.equal(await page.getByRole('alert').count(), 0, 'no gateway off the active version');
  });

  await steps.run('live flows and throughput appear on the gateway that carries a transfer', async () => {
    transfer = satlab(['bulk', 'client', 'get', '40M', '--server', '10.71.3.10', '--port', '5001', '--json'], 120000);
    const table = page.getByRole('table', { name: 'Fleet gateways' });
    const carrying = await until('a gateway row with a live flow', async () => {
      for (const name of ['local', 'gw2', 'gw3']) {
        const cells = await table.locator(`tr[data-gateway="${name}"] td`).allInnerTexts();
        if (Number(cells[4]) >= 1 && !cells[5].startsWith('0 ')) return name;
      }
      return null;
    });
    console.log(`    the transfer crosses ${carrying}`);
    if (shotsDir) await page.screenshot({ path: join(shotsDir, 'fleet.png'), fullPage: true });
    const report = JSON.parse((await transfer).trim().split('\n').pop());
    assert.equal(report.complete, true, `transfer: ${JSON.stringify(report)}`);
  });
} catch (e) {
  await steps.run('run the fleet suite', () => {
    throw e;
  });
} finally {
  await transfer?.catch(() => {});
  ok = steps.summary();
  await teardown();
  finishWorkDir(tmp, ok);
}
process.exit(ok ? 0 : 1);
