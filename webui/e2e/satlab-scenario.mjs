/* global document -- used inside functions that run in the page */
// The end-to-end story against the real gateway in satlab: log in, watch a live split flow,
// bypass the next one, cap the pacing with a BoD profile, roll back. The UI does every change; the
// API's flows JSON and the daemon's control socket are the independent witnesses of what happened.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { until } from './harness.mjs';
import { BULK_PORT, CLIENT, SERVER } from './lab.mjs';

const NEW_PASSWORD = 'e2e-Perigee-orbit-2026';
const BOD_FORWARD_BPS = 20_000_000; // pacing cap on a hub = the forward rate; geo-hts links at 50 Mbit/s
const BYPASS_RULE = 'bulk-5001';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls fn until it returns a truthy value; fails with `what` at the deadline. */

const toBulk = (f) => f.client.startsWith(`${CLIENT}:`) && f.server === `${SERVER}:${BULK_PORT}`;
const toHttp = (f) => f.client.startsWith(`${CLIENT}:`) && f.server === `${SERVER}:80`;
const satLeg = (f) => f.legs?.[f.legs?.satellite];
// A flow is listed before the gateway's first TCP_INFO sample of it (legs all zero, cc ""): skip those.
const sampled = (samples) => samples.filter((s) => satLeg(s)?.state);

export async function satlabSteps(steps, { context, baseUrl, password, lab, shotsDir, failDir }) {
  const page = context.pages()[0] ?? (await context.newPage());
  steps.onFailure = (name) => page.screenshot({ path: join(failDir, `failed-${name.replace(/[^a-z0-9]+/gi, '-')}.png`), fullPage: true });
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  const shot = async (name) => {
    if (shotsDir) await page.screenshot({ path: join(shotsDir, `${name}.png`), fullPage: true });
  };
  const heading = (name) => page.getByRole('heading', { level: 2, name, exact: true });
  const gotoNav = async (name) => {
    await page.getByRole('navigation', { name: 'Main navigation' }).getByRole('link', { name, exact: true }).click();
    await heading(name).waitFor();
  };
  /** The API as the signed-in browser sees it (same cookies, through the preview proxy). */
  const api = async (path) => {
    const res = await context.request.get(`${baseUrl}/api/v1${path}`);
    assert.equal(res.status(), 200, `GET /api/v1${path}: ${res.status()} ${await res.text()}`);
    return res.json();
  };
  /** An unsafe API call as the signed-in browser makes it (its session, the CSRF cookie echoed). */
  const send = async (method, path, data) => {
    const csrf = (await context.cookies()).find((c) => c.name === 'perigee_csrf')?.value ?? '';
    const res = await context.request.fetch(`${baseUrl}/api/v1${path}`, { method, data, headers: { 'X-CSRF-Token': csrf } });
    assert.ok(res.ok(), `${method} /api/v1${path}: ${res.status()} ${await res.text()}`);
    return res.json();
  };
  /** Samples the API's live flows every 300 ms while a transfer runs: flows matching `match`, and how
   * many distinct snapshots were seen (proof the collector kept polling the gateway meanwhile). */
  const watchFlows = (match, transfer) => {
    const flows = new Map();
    const snapshots = new Set();
    let ended = false;
    const finished = transfer.finally(() => (ended = true));
    const loop = (async () => {
      while (!ended) {
        const snap = await api('/flows');
        assert.equal(snap.error, null, `the API's collector reports: ${snap.error}`);
        snapshots.add(snap.fetched_at);
        for (const f of snap.flows.filter(match)) flows.set(f.id, [...(flows.get(f.id) ?? []), f]);
        await sleep(300);
      }
    })();
    const done = Promise.all([finished, loop]).then(([result]) => result);
    done.catch(() => {}); // a step that fails before awaiting it must not crash the run (teardown first)
    return { flows, snapshots, done };
  };
  /** After "Save and apply" (the dashboard's edits apply what they save): the version the page says it applied,
   * checked as the API's active version and the revision the gateway runs. A refusal fails with what the page says. */
  const appliedOnPage = async () => {
    const done = page.getByRole('status').filter({ hasText: /^Version \d+ applied/ }).last();
    const refused = page.getByRole('alert').filter({ hasText: /was saved but not applied/ });
    await done.or(refused).first().waitFor({ timeout: 30000 });
    if (await refused.count()) throw new Error(`the apply was refused: ${await refused.first().textContent()}`);
    const id = Number((await done.textContent()).match(/Version (\d+) applied/)[1]);
    assert.equal((await api('/versions')).active_version_id, id, 'the API records the version as active');
    const running = await lab.gateway('/v1/config');
    assert.equal(running.revision, `v${id}`, 'the gateway runs the applied revision');
    return { id, running };
  };

  await steps.run('log in with the one-time password, forced change', async () => {
    await page.goto(`${baseUrl}/flows`);
    await page.getByLabel('Username').fill('admin');
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Choose a new password' }).waitFor();
    await page.getByLabel('Current password').fill(password);
    await page.getByLabel(/^New password/).fill(NEW_PASSWORD);
    await page.getByLabel('Confirm new password').fill(NEW_PASSWORD);
    await page.getByRole('button', { name: 'Save password' }).click();
    await heading('Overview').waitFor();
    await page.getByRole('status').filter({ hasText: 'Live' }).first().waitFor();
    const health = await api('/health');
    assert.equal(health.gateway_reachable, true, 'the API reaches the satlab gateway');
  });

  let uncappedPacingMax = 0;
  await steps.run('a download through the satellite appears live: split, Hybla on the satellite leg, bytes growing', async () => {
    // Long enough (about 17 s at 50 Mbit/s) for the row, two API samples and three drill-down samples.
    const dl = watchFlows(toBulk, lab.bulkGet('100M'));
    await gotoNav('Flows');
    const row = page.getByRole('table', { name: 'Flows' }).getByRole('row').filter({ hasText: `${CLIENT}:` }).filter({ hasText: `${SERVER}:${BULK_PORT}` }).first();
    await row.waitFor();
    // Found by its heading, so a new column elsewhere does not move it.
    const headings = await page.getByRole('table', { name: 'Flows' }).getByRole('columnheader').allTextContents();
    // The bytes the flow moved across the satellite (the column the Flows table calls "Satellite ↓/↑").
    const bytesColumn = headings.findIndex((h) => h.startsWith('Satellite ↓/↑'));
    assert.ok(bytesColumn >= 0, `a Satellite ↓/↑ (bytes) column among ${headings.join(', ')}`);
    const bytesCell = row.getByRole('cell').nth(bytesColumn);
    const first = await bytesCell.textContent();
    await until('the bytes shown in the flow row to change', async () => (await bytesCell.textContent()) !== first);
    const [id, samples] = await until('two API samples of the flow with TCP_INFO', async () => [...dl.flows].find(([, s]) => sampled(s).length >= 2));
    const f = sampled(samples).at(-1);
    assert.equal(f.action, 'accelerate', 'split (accelerated), not bypassed');
    assert.equal(f.legs.satellite, 'client', 'on a hub the client-facing leg faces the satellite');
    assert.equal(satLeg(f).cc, 'hybla_ld', 'satellite leg congestion control');
    await until('bytes_down of the flow to grow', async () => {
      const s = sampled(dl.flows.get(id));
      return s.at(-1).bytes_down > s[0].bytes_down;
    });
    await shot('flows-live');
    await row.getByRole('link', { name: `Flow ${id} details` }).click();
    const satCard = page.locator('.mantine-Paper-root').filter({ has: page.getByRole('heading', { name: 'Satellite leg (client side)' }) });
    await satCard.getByRole('row').filter({ hasText: 'Congestion control' }).filter({ hasText: 'hybla_ld' }).waitFor();
    await until('a few live samples in the drill-down', async () => {
      const t = await page.getByText(/\d+ live samples since this page opened/).textContent();
      return Number(t.match(/(\d+)/)[1]) >= 3;
    });
    await shot('flow-drilldown-live');
    await gotoNav('Overview');
    await page.waitForFunction(() => !document.querySelector('.mantine-Skeleton-root'));
    await shot('overview-live');
    const result = await dl.done;
    assert.equal(result.complete, true, 'the download completed');
    assert.equal(result.bytes, 100_000_000);
    uncappedPacingMax = Math.max(...sampled(dl.flows.get(id)).map((s) => satLeg(s).pacing_rate_bps));
    console.log(`    flow ${id}: ${(result.goodput_bps / 1e6).toFixed(1)} Mbit/s goodput, satellite-leg pacing up to ${(uncappedPacingMax / 1e6).toFixed(0)} Mbit/s`);
    assert.ok(uncappedPacingMax > BOD_FORWARD_BPS, `without a cap the pacing rate exceeds ${BOD_FORWARD_BPS} (the later cap must be able to bind)`);
  });

  await steps.run(`add bypass rule ${BYPASS_RULE} (tcp ${SERVER}/32 port ${BULK_PORT}) and apply it`, async () => {
    await gotoNav('IPsec bypass');
    await page.getByRole('textbox', { name: /^Rule name/ }).fill(BYPASS_RULE);
    await page.getByRole('textbox', { name: 'Protocol' }).click();
    await page.getByRole('option', { name: 'tcp', exact: true }).click();
    await page.getByRole('textbox', { name: 'CIDRs' }).fill(`${SERVER}/32`);
    await page.getByRole('textbox', { name: 'CIDRs' }).press('Enter');
    await page.getByRole('textbox', { name: 'Ports' }).fill(String(BULK_PORT));
    await page.getByRole('textbox', { name: 'Ports' }).press('Enter');
    await page.getByRole('button', { name: 'Add rule' }).click();
    await page.getByRole('button', { name: 'Save and apply' }).click();
    const { running } = await appliedOnPage();
    const rule = running.bypass.find((r) => r.name === BYPASS_RULE);
    assert.deepEqual({ protocol: rule?.protocol, cidrs: rule?.cidrs, ports: rule?.ports }, { protocol: 'tcp', cidrs: [`${SERVER}/32`], ports: [String(BULK_PORT)] });
  });

  await steps.run('the next download on that port is not split, yet it runs through the gateway', async () => {
    const before = await lab.gateway('/v1/counters');
    // The earlier download's flow may still be listed while it closes: only new flows count.
    const earlier = new Set((await api('/flows')).flows.map((f) => f.id));
    const dl = watchFlows((f) => toBulk(f) && !earlier.has(f.id), lab.bulkGet('10M'));
    const result = await dl.done;
    assert.equal(result.complete, true, 'the download completed');
    assert.equal(result.bytes, 10_000_000);
    assert.ok(dl.snapshots.size >= 3, `the API took ${dl.snapshots.size} fresh flow snapshots during the download`);
    assert.deepEqual([...dl.flows.keys()], [], 'no split flow to the bypassed port in the live flows');
    const after = await lab.gateway('/v1/counters');
    assert.equal(after.flows_total, before.flows_total, 'the gateway split no new flow');
    const bypassed = after.by_action.bypass.bytes - before.by_action.bypass.bytes;
    assert.ok(bypassed >= 10_000_000, `the gateway's bypass counter grew by ${bypassed} bytes`);
  });

  const bodPage = async () => {
    await gotoNav('BoD tuning');
    await page.getByRole('table', { name: 'Derived values' }).waitFor();
  };
  // Soft steps: their failures (real bugs) are reported, the pacing and roll-back steps below still run.
  let latestBeforeBod = 0;
  let bodRunning = null;
  await steps.run(
    `BoD: a new profile (forward ${BOD_FORWARD_BPS / 1e6} Mbit/s, base RTT 600 ms) saved, written to what runs and applied, with a confirmation`,
    async () => {
      await bodPage();
      latestBeforeBod = (await api('/versions')).latest_version_id;
      await page.getByRole('textbox', { name: 'Profile name' }).fill('hts-20M');
      await page.getByRole('textbox', { name: 'Forward rate (bit/s)' }).fill(String(BOD_FORWARD_BPS));
      await page.getByRole('textbox', { name: 'Base RTT (ms)' }).fill('600');
      await page.getByRole('table', { name: 'Derived values' }).getByRole('row').filter({ hasText: 'pacing_rate_bps' }).filter({ hasText: /^pacing_rate_bps\s*20(\.0)? Mbit\/s/ }).waitFor();
      await page.getByRole('button', { name: 'Save, write to config and apply' }).click();
      const { id, running } = await appliedOnPage();
      assert.equal(id, latestBeforeBod + 1, 'one new version');
      bodRunning = running;
    },
    { soft: true },
  );

  await steps.run(
    'BoD: that version (pacing cap and Hybla base RTT 600 ms) applies on the gateway',
    async () => {
      assert.ok(bodRunning, 'the profile was written to the config and applied');
      const running = bodRunning;
      assert.equal(running.satellite.pacing_rate_bps, BOD_FORWARD_BPS);
      assert.equal(running.hybla.base_rtt_ms, 600);
    },
    { soft: true },
  );

  await steps.run(`BoD: pacing cap applied (Hybla base RTT overridden to 0); a new flow is paced at ≤ ${BOD_FORWARD_BPS / 1e6} Mbit/s`, async () => {
    await bodPage();
    await page.getByRole('textbox', { name: 'Profile name' }).and(page.locator('[value="hts-20M"]')).waitFor();
    await page.getByRole('textbox', { name: 'hybla_base_rtt_ms' }).fill('0');
    // The previous save's confirmation stays on the page: wait for the one naming the NEW version.
    const next = (await api('/versions')).latest_version_id + 1;
    await page.getByRole('button', { name: 'Save, write to config and apply' }).click();
    await page.getByRole('status').filter({ hasText: `Version ${next} applied` }).waitFor();
    const { id, running } = await appliedOnPage();
    assert.equal(running.satellite.pacing_rate_bps, BOD_FORWARD_BPS, "the gateway's active satellite.pacing_rate_bps");
    const active = await api('/config/active');
    assert.equal(active.id, id);
    assert.equal(active.config.satellite.pacing_rate_bps, BOD_FORWARD_BPS, "the API's active config");
    await page.waitForTimeout(300); // let the banner's removal settle before the screenshot
    await shot('bod-live');
    // Port 80: the bypass rule on the bulk port is still in force.
    const dl = watchFlows(toHttp, lab.fetchBytes(15_000_000));
    const result = await dl.done;
    assert.equal(result.status, 200);
    assert.equal(result.bytes, 15_000_000);
    const samples = sampled([...dl.flows.values()].flat());
    assert.ok(samples.length >= 3, `${samples.length} samples of the HTTP flow`);
    const pacing = samples.map((s) => satLeg(s).pacing_rate_bps);
    const max = Math.max(...pacing);
    console.log(`    satellite-leg pacing up to ${(max / 1e6).toFixed(2)} Mbit/s (uncapped before: ${(uncappedPacingMax / 1e6).toFixed(0)} Mbit/s)`);
    assert.ok(max <= BOD_FORWARD_BPS, `satellite-leg pacing_rate_bps ${max} exceeds the cap ${BOD_FORWARD_BPS}`);
    assert.ok(max >= 0.9 * BOD_FORWARD_BPS, `the cap never bound (max pacing ${max}): the flow did not ramp up`);
  });

  await steps.run('with the cache on, a port-80 download shows up live as a cache flow with both legs, then in the history', async () => {
    // The dashboard has no cache form: the config goes through the API the browser uses.
    const desired = (await api('/config')).config;
    const cfg = { ...desired, cache: { ...desired.cache, enabled: true, memory_mb: 64, disk_mb: 256, max_object_mb: 200 } };
    const change = await send('PUT', '/config', { config: cfg, comment: 'e2e: cache on' });
    const applied = await send('POST', `/versions/${change.version_id}/apply`, { comment: '' });
    assert.ok(applied.ok, `the cache config did not apply: ${JSON.stringify(applied)}`);
    await until('the gateway to serve port 80 from Squid', async () => {
      const h = await lab.gateway('/v1/health');
      return !(h.problems ?? []).some((p) => p.startsWith('cache:'));
    });
    const size = 20_000_000 + Math.floor(Math.random() * 100_000); // a new object: a miss, over the satellite
    const isCacheFlow = (f) => toHttp(f) && f.relay === 'squid';
    const dl = watchFlows(isCacheFlow, lab.fetchBytes(size));
    await gotoNav('Flows');
    const row = page.getByRole('table', { name: 'Flows' }).getByRole('row').filter({ hasText: `${SERVER}:80` }).filter({ hasText: 'squid' }).first();
    await row.waitFor();
    const [id] = await until('the API to show the cache flow with both legs moving bytes', async () =>
      [...dl.flows].find(([, samples]) => samples.some((f) => f.legs?.client?.bytes_acked > 0 && f.legs?.server?.bytes_received > 0 && f.rate_down_bps > 0)),
    );
    await row.getByRole('link', { name: `Flow ${id} details` }).click();
    // At the hub the client side faces the satellite: client <-> Squid is the satellite leg, Squid <-> origin the terrestrial one.
    for (const card of ['Satellite leg (client side)', 'Terrestrial leg (server side)']) {
      const paper = page.locator('.mantine-Paper-root').filter({ has: page.getByRole('heading', { name: card }) });
      await paper.getByRole('row').filter({ hasText: 'Bytes delivered / received' }).filter({ hasText: /[1-9][\d.]* (KiB|MiB)/ }).waitFor();
    }
    await page.getByText('cache (Squid)').first().waitFor();
    await shot('cache-flow-live');
    const result = await dl.done;
    assert.equal(result.status, 200);
    assert.equal(result.bytes, size);
    await gotoNav('Flows');
    await page.getByRole('tab', { name: 'Closed (history)' }).click();
    await page.getByRole('textbox', { name: 'Server' }).fill(SERVER);
    const closed = page.getByRole('table', { name: 'Closed flows' }).getByRole('row').filter({ hasText: 'cache · squid' }).first();
    await closed.waitFor();
    const csv = await page.getByRole('link', { name: 'Export the filtered flows as CSV' }).getAttribute('href');
    assert.match(csv, new RegExp(`server=${SERVER.replaceAll('.', '\\.')}`), `the export carries the filter: ${csv}`);
    const res = await context.request.get(`${baseUrl}${csv}`);
    assert.equal(res.status(), 200);
    const lines = (await res.text()).trim().split('\r\n');
    assert.ok(lines.length >= 2 && lines.slice(1).every((l) => l.includes(`,${SERVER}:`)), `the CSV holds only ${SERVER}'s flows`);
  });

  await steps.run('Config history: roll back to version 1 (the config the gateway started with); it runs again (no cap, no bypass rule)', async () => {
    await gotoNav('Config history');
    page.once('dialog', (d) => d.accept());
    await page.getByRole('button', { name: 'Roll back to version 1', exact: true }).click();
    const status = page.getByRole('status').filter({ hasText: /Rolled back as version \d+/ });
    await status.waitFor();
    const text = await status.textContent();
    assert.match(text, /is active/, text);
    const id = Number(text.match(/Rolled back as version (\d+)/)[1]);
    const running = await lab.gateway('/v1/config');
    assert.equal(running.revision, `v${id}`, 'the gateway runs the roll-back revision');
    // Version 1 is what the gateway ran when the API first asked (imported from it): satlab's own
    // config, whose pacing is the link's (above the BoD profile's cap).
    const first = await api('/versions/1');
    assert.equal(first.author, 'gateway', 'version 1 is the config imported from the gateway');
    assert.equal(running.satellite.pacing_rate_bps, first.config.satellite.pacing_rate_bps, 'pacing as the gateway started');
    assert.ok(running.satellite.pacing_rate_bps === 0 || running.satellite.pacing_rate_bps > BOD_FORWARD_BPS, 'pacing cap gone');
    assert.equal(running.bypass.some((r) => r.name === BYPASS_RULE), false, 'bypass rule gone');
    assert.equal((await api('/versions')).active_version_id, id);
  });

  await steps.run('after the roll back a download on the bulk port is split again and paced above the old cap', async () => {
    const dl = watchFlows(toBulk, lab.bulkGet('25M'));
    const result = await dl.done;
    assert.equal(result.complete, true);
    assert.equal(result.bytes, 25_000_000);
    const samples = sampled([...dl.flows.values()].flat());
    assert.ok(samples.length >= 2, `the split flow was seen ${samples.length} times`);
    const odd = samples.find((s) => s.action !== 'accelerate' || satLeg(s)?.cc !== 'hybla_ld');
    assert.equal(odd, undefined, `a sample not accelerated with hybla: ${JSON.stringify(odd)}`);
    const max = Math.max(...samples.map((s) => satLeg(s).pacing_rate_bps));
    assert.ok(max > BOD_FORWARD_BPS, `pacing ${max} should exceed the removed cap ${BOD_FORWARD_BPS}`);
  });

  await steps.run('log out; no uncaught errors in the page', async () => {
    await page.getByRole('button', { name: 'Account menu' }).click();
    await page.getByRole('menuitem', { name: 'Log out' }).click();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    assert.deepEqual(pageErrors, []);
  });
}
