#!/usr/bin/env node
// Page-load driver for bench/scenarios/web_pages.py: Debian's Chromium through playwright-core.
//
// Run it inside the client namespace (`ip netns exec <ns> node bench/browser/load_page.js`).
// It launches one headless Chromium (fresh --user-data-dir), prints {"ready":true}, then reads
// one URL per line on stdin and answers each with one JSON line: the load in a brand-new browser
// context (its own empty HTTP cache and socket pool, so every load starts cold on the client),
// timed from navigation start to the load event by the page's own Navigation Timing, plus every
// resource's timing and X-Cache header. EOF on stdin closes the browser.
//
// playwright-core comes from webui/node_modules (never downloads a browser: executablePath is
// Debian's /usr/bin/chromium).
'use strict';

const path = require('path');
const readline = require('readline');

const REPO = path.resolve(__dirname, '..', '..');
const { chromium } = require(path.join(REPO, 'webui', 'node_modules', 'playwright-core'));

const CHROMIUM = process.env.PERIGEE_CHROMIUM || '/usr/bin/chromium';
const LOAD_TIMEOUT_MS = Number(process.env.WEB_LOAD_TIMEOUT_MS || 60000);
// Keep Chromium quiet: no QUIC, no GPU, no background fetches that would cross the emulated link.
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-proxy-server',
];

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// Runs in the page: Navigation and Resource Timing, ms since navigation start.
function timingsInPage() {
  const nav = performance.getEntriesByType('navigation')[0];
  const round = (x) => Math.round(x * 1000) / 1000;
  return {
    load_ms: round(nav.loadEventStart),
    dcl_ms: round(nav.domContentLoadedEventStart),
    html: {
      connect_start_ms: round(nav.connectStart),
      connect_end_ms: round(nav.connectEnd),
      request_start_ms: round(nav.requestStart),
      response_start_ms: round(nav.responseStart),
      response_end_ms: round(nav.responseEnd),
    },
    resources: performance.getEntriesByType('resource').map((r) => ({
      name: r.name,
      start_ms: round(r.startTime),
      connect_start_ms: round(r.connectStart),
      connect_end_ms: round(r.connectEnd),
      request_start_ms: round(r.requestStart),
      response_start_ms: round(r.responseStart),
      response_end_ms: round(r.responseEnd),
      bytes: r.encodedBodySize,
    })),
  };
}

async function loadOnce(browser, url) {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    const xcache = {};
    const statuses = {};
    page.on('response', (resp) => {
      xcache[resp.url()] = resp.headers()['x-cache'] || '';
      statuses[resp.url()] = resp.status();
    });
    await page.goto(url, { waitUntil: 'load', timeout: LOAD_TIMEOUT_MS });
    const t = await page.evaluate(timingsInPage);
    // Connection reuse as Chromium saw it: a resource whose connectEnd > connectStart opened one.
    const opened = t.resources.filter((r) => r.connect_end_ms > r.connect_start_ms).length + 1;
    return { ok: true, url, ...t, connections: opened, xcache, statuses };
  } finally {
    await context.close();
  }
}

async function main() {
  // launch() gives Chromium a fresh temporary --user-data-dir of its own (removed on close); each
  // load then gets a new browser context on top of it.
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
  try {
    emit({ ready: true, version: browser.version() });
    const lines = readline.createInterface({ input: process.stdin });
    for await (const line of lines) {
      const url = line.trim();
      if (!url) continue;
      try {
        emit(await loadOnce(browser, url));
      } catch (err) {
        emit({ ok: false, url, error: String(err && err.message ? err.message : err).slice(0, 400) });
      }
    }
  } finally {
    await browser.close();
  }
}

main().catch((err) => {
  emit({ ok: false, error: String(err && err.stack ? err.stack : err).slice(0, 800) });
  process.exit(1);
});
