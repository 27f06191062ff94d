#!/usr/bin/env node
/* global window -- used inside a function that runs in the page */
// End-to-end: a terminal managed from its hub with the real gateways at both ends, every step in the two dashboards.
// `scripts/demo up` under prefix um- (its own state and run directories and free ports, as
// lab/tests/test_managed_satlab.py sets up its demo): satlab geo-hts with a gateway at each end, each end's API in
// its gateway's namespace behind nginx (the hub's also on its satellite-side address https://10.71.2.2, where a
// terminal reaches it). In the browser: at the hub, the lab's fingerprint enrollment revoked and an enrollment token
// made (the hub's pin as its API reports it); at the terminal, the join with the three values the hub's page shows
// (its join goes across the emulated satellite); at the hub, a version with `quic: pass` sent to the terminal and its
// page showing it applied with the terminal's running revision and its sites' figures; at the terminal, its
// dashboard managed and its history holding the hub's version. Witnesses that are not the APIs: the pin against the
// certificate file nginx serves, a sha256-checked download for the site figures, and the terminal gateway's own
// control socket (`GET /v1/config`, `/v1/health`) for what it runs. Needs root; run it under the netns lock.
//   node e2e/managed-satlab.mjs            (or make -C webui test-managed-satlab)
// Knobs as e2e/satlab.mjs: PERIGEE_E2E_SCREENSHOTS, PERIGEE_E2E_KEEP, SATLAB_MANAGED_PREFIX (default um-).
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { controlGet } from './control.mjs';
import { freePort, HUNG_MS, needsRoot, until } from './harness.mjs';
import { finishWorkDir, firstLogin, launchBrowser, makeWorkDir, python, repo, shotsDir } from './dashboard-stack.mjs';
import { reviewQuicPass } from './managed-version.mjs';
import { Steps } from './steps.mjs';

needsRoot('the managed-terminal satlab browser suite');

const PREFIX = process.env.SATLAB_MANAGED_PREFIX ?? 'um-';
const DEMO = join(repo, 'scripts', 'demo');
const SATLAB = join(repo, 'bin', 'satlab');
const SITE = 'site-1'; // the lab's one remote site and terminal name (lab/satlab/gateway.py)
const PREFIXES = ['10.71.1.0/24', 'fd71:1::/64'];
const HUB_URL = 'https://10.71.2.2'; // the hub's satellite-side address: only the terminal's end reaches it
const DOWNLOAD = 4_000_000; // through the terminal, before the version: its report after the version counts it
const NEW_PASSWORD = 'e2e-Perigee-managed-satlab-2026';
const UP_HUNG_MS = 600000; // the demo's bring-up: about a minute on a quiet 2-core box
const sock = (role) => `/run/satlab/${PREFIX}/gw-${PREFIX}${role}.sock`;
const control = (role, path) => controlGet(sock(role), path, { timeoutMs: 20000 });

function run(cmd, args, { env = process.env, timeoutMs = HUNG_MS } = {}) {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { env, timeout: timeoutMs, maxBuffer: 8 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${[cmd, ...args].join(' ')} failed (${err.code ?? err.signal}): ${(stderr || stdout).slice(-3000)}`));
      else resolve(stdout);
    });
  });
}

const tmp = makeWorkDir('perigee-e2e-managed-satlab-');
chmodSync(tmp, 0o755); // the APIs (user perigee) reach their data directories through it
const demoEnv = { ...process.env };
for (const name of ['PERIGEE_DEMO_GATEWAY', 'PERIGEE_DEMO_CACHE', 'PERIGEE_DEMO_PROFILE']) delete demoEnv[name]; // the demo's defaults
const ports = {};
const demo = (cmd, timeoutMs = UP_HUNG_MS) => run(DEMO, [cmd], { env: demoEnv, timeoutMs });
const contexts = [];
const steps = new Steps();
let demoStarted = false;
let ok = false;

let tornDown;
/** Closes the browsers, takes the demo down (its lab, APIs, nginx, traffic); once, whoever asks. */
function teardown() {
  tornDown ??= (async () => {
    for (const c of contexts) await Promise.race([c.close().catch(() => {}), new Promise((r) => setTimeout(r, 10000))]);
    if (demoStarted) await demo('down').catch((e) => console.log(`e2e: scripts/demo down failed: ${e.message}`));
  })();
  return tornDown;
}
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.once(sig, async () => {
    console.log(`e2e: ${sig}, tearing down`);
    await teardown();
    process.exit(130);
  });
}

/** One end's dashboard (nginx on 127.0.0.1, its self-signed certificate) and a browser of its own (no shared cookie). */
async function openEnd(role) {
  const dir = join(tmp, `browser-${role}`);
  mkdirSync(dir);
  const context = await launchBrowser(dir, { ignoreHTTPSErrors: true, handleSIGINT: false, handleSIGTERM: false, handleSIGHUP: false });
  contexts.push(context);
  const page = context.pages()[0] ?? (await context.newPage());
  page.on('pageerror', (e) => console.log(`e2e: ${role} page error: ${e.message}`));
  const baseUrl = `https://127.0.0.1:${ports[role]}`;
  const password = readFileSync(join(tmp, 'state', role, 'api', 'initial-admin-password'), 'utf8').trim();
  const get = async (path) => {
    const res = await context.request.get(`${baseUrl}/api/v1${path}`);
    assert.equal(res.status(), 200, `${role}: GET ${path}: ${res.status()}`);
    return res.json();
  };
  return { role, baseUrl, password, context, page, get };
}

/** The SHA-256 pin of a certificate file's public key (SubjectPublicKeyInfo), as the join checks it. */
function pinOf(certFile) {
  const spki = new X509Certificate(readFileSync(certFile)).publicKey.export({ type: 'spki', format: 'der' });
  return `sha256:${createHash('sha256').update(spki).digest('hex')}`;
}

const t0 = Date.now();
try {
  let hub;
  let terminal;
  await steps.run(`scripts/demo up (${PREFIX}, geo-hts, a gateway and a dashboard at each end), two browsers`, async () => {
    for (const k of ['hub', 'hub_http', 'terminal', 'terminal_http']) ports[k] = await freePort();
    Object.assign(demoEnv, {
      PERIGEE_DEMO_PREFIX: PREFIX,
      PERIGEE_DEMO_STATE_DIR: join(tmp, 'state'),
      PERIGEE_DEMO_RUN_DIR: join(tmp, 'run'),
      PERIGEE_DEMO_PORT: String(ports.hub),
      PERIGEE_DEMO_HTTP_PORT: String(ports.hub_http),
      PERIGEE_DEMO_TERMINAL_PORT: String(ports.terminal),
      PERIGEE_DEMO_TERMINAL_HTTP_PORT: String(ports.terminal_http),
    });
    // nginx serves the built dashboard (webui/dist) at both ends.
    if (!existsSync(join(repo, 'webui', 'dist', 'index.html'))) {
      execFileSync(join(repo, 'webui', 'node_modules', '.bin', 'vite'), ['build', '--logLevel', 'warn'], { cwd: join(repo, 'webui'), stdio: 'inherit' });
    }
    demoStarted = true;
    await demo('down'); // a demo left behind by an interrupted run (same prefix, other directories: satlab's part)
    await run(SATLAB, ['--prefix', PREFIX, 'down'], { timeoutMs: 120000 });
    const up = Date.now();
    await demo('up');
    console.log(`    the demo is up after ${((Date.now() - up) / 1000).toFixed(0)} s`);
    // Its background traffic mix stops: the site figures below count this suite's own download, and the box is shared.
    const mix = Number(readFileSync(join(tmp, 'run', 'traffic.pid'), 'utf8'));
    try {
      process.kill(-mix, 'SIGTERM');
    } catch {
      /* already gone */
    }
    hub = await openEnd('hub');
    terminal = await openEnd('terminal');
  });
  if (hub && terminal) {
    steps.onFailure = async (name) => {
      for (const end of [hub, terminal]) {
        await end.page.screenshot({ path: join(tmp, `failed-${end.role}-${name.replace(/[^a-z0-9]+/gi, '-')}.png`), fullPage: true }).catch(() => {});
      }
    };
  }

  await steps.run('log in at both ends with the one-time password, forced change', async () => {
    await firstLogin(hub.page, `${hub.baseUrl}/terminals`, { password: hub.password, newPassword: NEW_PASSWORD });
    await firstLogin(terminal.page, `${terminal.baseUrl}/system`, { password: terminal.password, newPassword: NEW_PASSWORD });
  });

  const tokens = () => hub.page.getByRole('table', { name: 'Enrollment tokens' }).getByRole('row').filter({ hasText: SITE });
  const terminalRow = () => hub.page.getByRole('table', { name: 'Enrolled terminals' }).locator(`tr[data-terminal="${SITE}"]`);
  await steps.run("at the hub: the lab's fingerprint enrollment revoked from the Terminals page", async () => {
    const { page } = hub;
    await page.getByRole('navigation', { name: 'Main navigation' }).getByRole('link', { name: 'Terminals', exact: true }).click();
    await terminalRow().getByRole('button', { name: 'Revoke…' }).click();
    const dialog = page.getByRole('dialog', { name: `Revoke terminal ${SITE}?` });
    await dialog.getByRole('button', { name: `Revoke ${SITE}` }).click();
    await terminalRow().waitFor({ state: 'detached' });
    await until('the hub gateway to drop the terminal', async () => !(await control('hub', '/v1/peer')).terminals.some((t) => t.name === SITE));
  });

  let joinFile;
  await steps.run("at the hub: an enrollment token, with the hub's pin as its API reports it and the join file", async () => {
    const { page } = hub;
    const form = page.getByRole('form', { name: 'Create an enrollment token' });
    await form.getByLabel(/^Terminal name/).fill(SITE);
    await form.getByLabel(/^Site prefixes/).fill(PREFIXES.join('\n'));
    await form.getByLabel(/^Comment/).fill('the lab terminal, managed');
    await form.getByRole('button', { name: 'Create token' }).click();
    const panel = page.getByRole('status', { name: `Enrollment token for ${SITE} created` });
    await panel.waitFor();
    const token = (await panel.getByLabel('Enrollment token', { exact: true }).textContent()).trim();
    assert.match(token, /^pgt1\./);
    // The pin is filled in from the hub's API: it must be the key of the certificate nginx serves (its file).
    const pin = await panel.getByLabel('Hub pin').inputValue();
    assert.equal(pin, pinOf(join(tmp, 'state', 'hub', 'tls', 'cert.pem')), "the pin shown is not the hub's certificate key");
    // The URL suggested is the one this browser used (127.0.0.1): the terminal reaches the hub across the satellite.
    await panel.getByLabel('Hub URL').fill(HUB_URL);
    joinFile = JSON.parse(await panel.getByLabel('Join file', { exact: true }).textContent());
    assert.deepEqual(joinFile, { hub_url: HUB_URL, hub_pin: pin, token });
    await tokens().getByText('live', { exact: true }).waitFor();
  });

  await steps.run("at the terminal: joins with the hub's three values across the satellite; its dashboard says managed", async () => {
    const { page } = terminal;
    await page.getByRole('navigation', { name: 'Main navigation' }).getByRole('link', { name: 'System settings', exact: true }).click();
    const form = page.getByRole('form', { name: 'Join a hub' });
    await form.getByLabel('Hub URL').fill(joinFile.hub_url);
    await form.getByLabel('Hub pin').fill(joinFile.hub_pin);
    await form.getByLabel('Enrollment token').fill(joinFile.token);
    const started = Date.now();
    await form.getByRole('button', { name: 'Join the hub' }).click();
    const managedAs = `Managed from the hub ${HUB_URL} as ${SITE}`;
    await page.getByTestId('managed-status').getByText(managedAs).waitFor();
    await page.getByTestId('managed-banner').getByText(managedAs).waitFor();
    console.log(`    joined after ${((Date.now() - started) / 1000).toFixed(1)} s`);
    // The hub's answer is the peer section the lab gave it (the same hub and pins: no new local version); the token
    // enrolled its identity again, so the hub's gateway holds its pool connected again.
    assert.equal((await control('terminal', '/v1/config')).peer?.hub, '10.71.2.2');
    await until('the terminal connected at the hub gateway', async () => (await control('hub', '/v1/peer')).terminals.find((t) => t.name === SITE && t.idle_connections > 0));
  });

  await steps.run("at the hub: the token used, the terminal's page shows it managed, healthy, on its gateway's revision", async () => {
    const { page } = hub;
    await tokens().getByText('used', { exact: true }).waitFor();
    await terminalRow().getByRole('link', { name: SITE }).click();
    await page.getByRole('heading', { level: 2, name: `Terminal ${SITE}` }).waitFor();
    const report = page.getByRole('region', { name: 'Its report' });
    await report.getByText('managed from here').waitFor();
    // Its first report, sent as it joined, names its peer path down (the revocation closed it): healthy shows with
    // its next one (every 30 s).
    const seen = Date.now();
    const first = await hub.get(`/peer/terminals/${SITE}`);
    await report.getByText('healthy', { exact: true }).waitFor();
    console.log(`    its report: healthy after ${((Date.now() - seen) / 1000).toFixed(1)} s (first seen: ${JSON.stringify([first.health_ok, first.problems])})`);
    const revision = (await control('terminal', '/v1/health')).config_revision;
    await report.locator('[data-figure="Running revision"]').getByText(revision, { exact: true }).waitFor();
    await page.getByText('No version was made for it yet.').waitFor();
  });

  let made;
  let sha;
  await steps.run(`a ${DOWNLOAD}-byte download through the terminal (sha256 checked), then a version with quic: pass sent from the hub`, async () => {
    const want = (await run(python, ['-c', `from satlab import content; print(content.stream_sha256(${DOWNLOAD}))`])).trim();
    const got = JSON.parse((await run(SATLAB, ['--prefix', PREFIX, 'bulk', 'client', 'get', String(DOWNLOAD), '--server', '10.71.3.10', '--json'])).trim().split('\n').pop());
    assert.deepEqual([got.bytes, got.sha256], [DOWNLOAD, want], JSON.stringify(got));
    sha = want;
    const before = await control('terminal', '/v1/config');
    assert.equal(before.quic, 'fallback', 'the terminal gateway already passes QUIC');
    const { page } = hub;
    const dialog = await reviewQuicPass(page, SITE, 'QUIC end to end');
    await dialog.getByRole('button', { name: `Send to ${SITE}` }).click();
    await dialog.waitFor({ state: 'detached' });
    [made] = (await hub.get(`/peer/terminals/${SITE}/versions`)).versions;
    assert.deepEqual([made.sections, made.comment, made.created_by], [['quic'], 'QUIC end to end', 'admin']);
  });

  let revision;
  await steps.run("at the hub: applied, with the terminal's running revision and its sites' figures from its report", async () => {
    const { page } = hub;
    const row = page.getByRole('table', { name: 'Its config versions' }).locator(`tr[data-version="${made.id}"]`);
    await row.getByText('applied', { exact: true }).waitFor();
    const report = page.getByRole('region', { name: 'Its report' });
    await report.locator('[data-figure="Applied hub version"]').getByText(String(made.id), { exact: true }).waitFor();
    // The revision the page shows is the one the terminal's gateway runs, asked on its own control socket.
    const running = await control('terminal', '/v1/config');
    revision = running.revision;
    await report.locator('[data-figure="Running revision"]').getByText(revision, { exact: true }).waitFor();
    // Its sites as it reports them: the lab's site (its satellite leg's payload, counted by the terminal's gateway)
    // holds at least the download. The tight bounds, between two reports: lab/tests/test_managed_satlab.py.
    const sites = page.getByRole('table', { name: 'Its sites as it reports them' });
    await sites.getByRole('row').filter({ hasText: SITE }).waitFor();
    const detail = await hub.get(`/peer/terminals/${SITE}`);
    const site = detail.sites.find((s) => s.name === SITE);
    assert.ok(site && site.rx_bytes >= DOWNLOAD, `site ${SITE} reported ${JSON.stringify(detail.sites)}, the download was ${DOWNLOAD} (sha256 ${sha})`);
    console.log(`    the terminal runs ${revision}; site ${SITE} reported rx ${site.rx_bytes} tx ${site.tx_bytes} (totals ${detail.rx_bytes}/${detail.tx_bytes})`);
    await page.evaluate(() => window.scrollTo(0, 0)); // the sticky header at the top of a full-page shot
    if (shotsDir) await page.screenshot({ path: join(shotsDir, 'managed-terminal-satlab.png'), fullPage: true });
  });

  await steps.run("at the terminal: managed, its history holds the hub's version active; its gateway runs it", async () => {
    const { page } = terminal;
    await page.getByTestId('managed-banner').getByText(`Hub version ${made.id}: applied.`, { exact: false }).waitFor({ timeout: 30000 });
    await page.getByRole('navigation', { name: 'Main navigation' }).getByRole('link', { name: 'Config history', exact: true }).click();
    const row = page.getByRole('table', { name: 'Config versions' }).getByRole('row').filter({ hasText: `hub version ${made.id}: QUIC end to end` });
    await row.getByText('hub', { exact: true }).waitFor();
    await row.getByText('active', { exact: true }).waitFor();
    if (shotsDir) await page.screenshot({ path: join(shotsDir, 'managed-terminal-satlab-history.png'), fullPage: true });
    // The independent witness: the terminal gateway's control socket, not its API.
    const [cfg, health] = [await control('terminal', '/v1/config'), await control('terminal', '/v1/health')];
    assert.equal(cfg.quic, 'pass', 'the terminal gateway does not run the hub version');
    assert.deepEqual([cfg.revision, health.config_revision], [revision, revision]);
    const status = await terminal.get('/managed/status');
    assert.deepEqual([status.hub_version_id, status.outcome, status.last_error], [made.id, 'applied', null]);
  });
} catch (e) {
  await steps.run('start the demo and the browsers', () => {
    throw e;
  });
} finally {
  ok = steps.summary();
  await teardown();
  console.log(`e2e: managed-satlab suite took ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  finishWorkDir(tmp, ok);
}
process.exit(ok ? 0 : 1);
