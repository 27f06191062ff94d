#!/usr/bin/env node
// End-to-end suite against the REAL gateway: satlab (profile geo-hts, splitter daemon in the hub
// namespace), the API wired to the daemon's control socket, the built dashboard served by vite preview,
// Debian's Chromium via playwright-core. Needs root (namespaces). Always tears everything down.
//   node e2e/satlab.mjs            (or make test-satlab)
// Knobs: PERIGEE_E2E_SCREENSHOTS=<dir>|0 (default docs/screenshots), PERIGEE_E2E_KEEP=1 (keep logs),
// PERIGEE_E2E_BUILD=1 (rebuild dist), PERIGEE_CHROMIUM, PERIGEE_PYTHON, SATLAB_E2E_PREFIX (default ue-).
import { needsRoot, stopAll } from './harness.mjs';
import { finishWorkDir, launchBrowser, makeWorkDir, repo, shotsDir, startApi, startWebServer } from './dashboard-stack.mjs';
import { Steps } from './steps.mjs';
import { Lab } from './lab.mjs';
import { satlabSteps } from './satlab-scenario.mjs';

needsRoot('the satlab browser suite');
const tmp = makeWorkDir('perigee-e2e-satlab-');

// geo-hts: 600 ms RTT and 50 Mbit/s forward, so a 40 MB download lasts ~13 s (long enough to watch it
// live), Hybla has a long RTT to act on, and a 20 Mbit/s pacing cap binds visibly below the link rate.
const PROFILE = 'geo-hts';
const lab = new Lab(repo, process.env.SATLAB_E2E_PREFIX ?? 'ue-');

let tornDown;
/** Closes the browser, stops the API and the preview server, takes the lab down; once, whoever asks. */
function teardown() {
  tornDown ??= (async () => {
    const keepAlive = setInterval(() => {}, 1000); // an empty event loop must not end the process mid-way
    const close = context?.close().catch(() => {});
    await Promise.race([close, new Promise((r) => setTimeout(r, 10000))]);
    await stopAll();
    await lab.down().catch((e) => console.log(`e2e: satlab down failed: ${e.message}`));
    clearInterval(keepAlive);
  })();
  return tornDown;
}

const steps = new Steps();
let context;
let ok = false;
const t0 = Date.now();
process.on('unhandledRejection', (e) => console.log(`e2e: unhandled rejection: ${e?.message ?? e}`));
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.once(sig, async () => {
    console.log(`e2e: ${sig}, tearing down`);
    await teardown();
    process.exit(130);
  });
}
try {
  console.log(`e2e: working dir ${tmp}`);
  await steps.run(`satlab ${lab.prefix} up (${PROFILE}, gateway in the hub), API, dashboard, browser`, async () => {
    console.log(`    ${(await lab.up(PROFILE)).trim()}`);
    const backend = await startApi(tmp, { socket: lab.socket });
    const baseUrl = await startWebServer(tmp, backend.apiUrl);
    console.log(`    dashboard ${baseUrl} → API ${backend.apiUrl} → gateway ${lab.socket}`);
    // The suite's own handlers tear down the lab too; Playwright's would only kill the browser.
    context = await launchBrowser(tmp, { handleSIGINT: false, handleSIGTERM: false, handleSIGHUP: false });
    Object.assign(steps, { baseUrl, password: backend.password });
  });
  if (context) {
    await satlabSteps(steps, { context, baseUrl: steps.baseUrl, password: steps.password, lab, shotsDir, failDir: tmp });
  }
} catch (e) {
  await steps.run('run the satlab suite', () => {
    throw e;
  });
} finally {
  ok = steps.summary();
  await teardown();
  console.log(`e2e: satlab suite took ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  finishWorkDir(tmp, ok);
}
process.exit(ok ? 0 : 1);
