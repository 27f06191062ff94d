#!/usr/bin/env node
// Page-load driver for bench/scenarios/modern_web.py: Debian's Chromium through playwright-core.
//
// Run it inside the client namespace (`ip netns exec <ns> node bench/browser/load_modern.js`), so
// Chromium resolves names through that namespace's /etc/resolv.conf (satlab points it at the lab's
// DNS server). It prints {"ready":true}, then reads one JSON request per line on stdin:
//   {"url": "https://...", "quic": "off"|"race"|"force", "hosts": ["h:443", ...], "expect": 56,
//    "ca": "/run/satlab/<prefix>/web-tls/ca.pem"}
// and answers each with one JSON line. Every load starts a brand-new Chromium with a fresh
// temporary profile (no HTTP cache, no host cache, no open connections, no learned Alt-Svc or
// HTTPS-record state), so nothing of one load helps the next. The answer holds, per request, the
// browser's network timing (DNS, connect, TLS, request sent, headers received, last byte), its
// protocol, status and connection, and the load event. The load is complete when the load event
// has fired and `expect` requests (the HTML included) have finished: a page's last objects
// (images named by a fetched JSON) may arrive after its load event.
//
// Trust: the lab's CA is made fresh per lab. Each load gets a new $HOME whose NSS database
// (~/.pki/nssdb, where Chromium on Linux reads locally trusted roots) trusts that CA alone: the
// certificates verify for real, over TCP+TLS and QUIC alike (--ignore-certificate-errors-spki-list
// does not reach Chromium's QUIC verifier). certutil comes from Debian's libnss3-tools.
// QUIC: "off" adds --disable-quic (TCP only). "race": QUIC on; the lab's DNS answers HTTPS records
// with alpn h3, so Chromium tries QUIC beside TCP as it does for such sites on the internet (in the
// lab that attempt cannot succeed: Chromium takes QUIC only from publicly trusted roots unless the
// origin is forced, so "race" measures what a QUIC attempt costs TCP, e.g. with the gateway's
// `quic: fallback`). "force": --origin-to-force-quic-on for `hosts`: HTTP/3 from the first request,
// as a browser that learned h3 from an earlier visit; no TCP fallback.
'use strict';

const { execFileSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const readline = require('readline');

const REPO = path.resolve(__dirname, '..', '..');
// PERIGEE_PLAYWRIGHT_CORE: another install of playwright-core (default: the dashboard's).
const { chromium } = require(
  process.env.PERIGEE_PLAYWRIGHT_CORE || path.join(REPO, 'webui', 'node_modules', 'playwright-core'),
);

const CHROMIUM = process.env.PERIGEE_CHROMIUM || '/usr/bin/chromium';
const LOAD_TIMEOUT_MS = Number(process.env.WEB_LOAD_TIMEOUT_MS || 60000);
// No GPU, no background fetches that would cross the emulated link, no proxy.
const BASE_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-proxy-server',
  // Chromium's own resolver, which also asks for HTTPS records (the same in every mode).
  '--enable-features=AsyncDns,UseDnsHttpsSvcb,UseDnsHttpsSvcbAlpn',
];
const QUIC_MODES = ['off', 'race', 'force'];

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// One load's network record from the DevTools protocol (CDP): per request the network stack's load
// timing (what Resource Timing is built from; Resource Timing itself leaves out the requests made by
// a cross-origin stylesheet, such as its background images), its protocol, status and size, plus
// the load event. Times are ms since the document's request was issued (CDP's monotonic clock).
class NetRecorder {
  constructor(expect) {
    this.expect = expect;
    this.requests = new Map(); // requestId -> record
    this.finished = 0;
    this.loadTs = null;
    this.t0 = null;
    this.done = new Promise((resolve) => {
      this.resolve = resolve;
    });
  }

  attach(cdp) {
    cdp.on('Network.requestWillBeSent', (e) => {
      if (e.request.url.startsWith('data:')) return;
      if (this.t0 === null) this.t0 = e.timestamp;
      this.requests.set(e.requestId, { url: e.request.url, type: e.type, issued: e.timestamp });
    });
    cdp.on('Network.responseReceived', (e) => {
      const r = this.requests.get(e.requestId);
      if (!r) return;
      r.status = e.response.status;
      r.protocol = e.response.protocol;
      r.reused = !!e.response.connectionReused;
      r.connection_id = e.response.connectionId;
      r.timing = e.response.timing || null;
    });
    cdp.on('Network.loadingFinished', (e) => this.finish(e.requestId, e.timestamp, e.encodedDataLength, null));
    cdp.on('Network.loadingFailed', (e) => this.finish(e.requestId, e.timestamp, 0, e.errorText));
    cdp.on('Page.loadEventFired', (e) => {
      this.loadTs = e.timestamp;
      this.check();
    });
  }

  finish(id, ts, bytes, error) {
    const r = this.requests.get(id);
    if (!r || r.end !== undefined) return;
    r.end = ts;
    r.wire_bytes = bytes;
    if (error) r.error = error;
    this.finished += 1;
    this.check();
  }

  check() {
    if (this.loadTs !== null && this.finished >= this.expect) this.resolve();
  }

  result() {
    const ms = (ts) => Math.round((ts - this.t0) * 1e6) / 1000;
    const rel = (t, base, key) => (t && t[key] >= 0 ? Math.round((base + t[key] / 1000 - this.t0) * 1e6) / 1000 : -1);
    const requests = [];
    for (const r of this.requests.values()) {
      const t = r.timing;
      const base = t ? t.requestTime : 0;
      requests.push({
        url: r.url,
        type: r.type,
        status: r.status || 0,
        protocol: r.protocol || '',
        reused: !!r.reused,
        connection_id: r.connection_id === undefined ? -1 : r.connection_id,
        error: r.error || '',
        issued_ms: ms(r.issued),
        dns_start_ms: rel(t, base, 'dnsStart'),
        dns_end_ms: rel(t, base, 'dnsEnd'),
        connect_start_ms: rel(t, base, 'connectStart'),
        tls_start_ms: rel(t, base, 'sslStart'),
        tls_end_ms: rel(t, base, 'sslEnd'),
        connect_end_ms: rel(t, base, 'connectEnd'),
        send_start_ms: rel(t, base, 'sendStart'),
        headers_end_ms: rel(t, base, 'receiveHeadersEnd'),
        end_ms: r.end === undefined ? -1 : ms(r.end),
        wire_bytes: r.wire_bytes || 0,
      });
    }
    return { load_ms: this.loadTs === null ? -1 : ms(this.loadTs), requests };
  }
}

// A fresh $HOME whose NSS database trusts exactly the lab's CA.
function trustingHome(caFile) {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'pw-home-'));
  const db = path.join(home, '.pki', 'nssdb');
  fs.mkdirSync(db, { recursive: true });
  execFileSync('certutil', ['-d', `sql:${db}`, '-N', '--empty-password']);
  execFileSync('certutil', ['-d', `sql:${db}`, '-A', '-t', 'C,,', '-n', 'perigee-satlab-ca', '-i', caFile]);
  return home;
}

function flagsFor(req) {
  if (!QUIC_MODES.includes(req.quic)) throw new Error(`quic must be one of ${QUIC_MODES}, not ${req.quic}`);
  const flags = BASE_FLAGS.slice();
  if (req.quic === 'off') flags.push('--disable-quic');
  if (req.quic === 'force') flags.push(`--origin-to-force-quic-on=${req.hosts.join(',')}`);
  return flags;
}

async function loadOnce(req) {
  const flags = flagsFor(req);
  const home = trustingHome(req.ca);
  let browser;
  try {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: flags,
      env: { ...process.env, HOME: home },
    });
    return await measure(browser, req);
  } finally {
    if (browser) await browser.close();
    fs.rmSync(home, { recursive: true, force: true });
  }
}

async function measure(browser, req) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  const rec = new NetRecorder(req.expect);
  rec.attach(cdp);
  await cdp.send('Network.enable');
  await cdp.send('Page.enable');
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not complete in ${LOAD_TIMEOUT_MS} ms`)), LOAD_TIMEOUT_MS);
  });
  try {
    await Promise.race([
      page.goto(req.url, { waitUntil: 'commit', timeout: LOAD_TIMEOUT_MS }).then(() => rec.done),
      timeout,
    ]);
  } catch (err) {
    const r = rec.result();
    const have = r.requests.filter((q) => q.end_ms >= 0).length;
    throw new Error(`${err.message} (${have} of ${req.expect} objects, load event ${r.load_ms} ms)`);
  } finally {
    clearTimeout(timer);
  }
  return { ok: true, url: req.url, quic: req.quic, version: browser.version(), ...rec.result() };
}

async function main() {
  emit({ ready: true });
  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (!line.trim()) continue;
    let req;
    try {
      req = JSON.parse(line);
    } catch (err) {
      emit({ ok: false, error: `bad request line: ${String(err)}` });
      continue;
    }
    try {
      emit(await loadOnce(req));
    } catch (err) {
      emit({ ok: false, url: req.url, error: String(err && err.message ? err.message : err).slice(0, 400) });
    }
  }
}

main().catch((err) => {
  emit({ ok: false, error: String(err && err.stack ? err.stack : err).slice(0, 800) });
  process.exit(1);
});
