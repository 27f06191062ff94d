// Process and port helpers for the end-to-end runner: start, wait for, and stop the servers it needs.
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { createServer } from 'node:net';

/**
 * How long a browser suite waits for something it expects before it calls it hung: generous on purpose, a loaded
 * machine is slow, not wrong (how fast the dashboard is: the bundle budget, `npm run size`, and the benchmarks).
 */
export const HUNG_MS = 60000;

/** Polls `fn` every `everyMs` until it returns something truthy (returned), or fails naming `what`. */
export async function until(what, fn, { timeoutMs = HUNG_MS, everyMs = 250 } = {}) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const v = await fn();
    if (v) return v;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

/**
 * The one convention for a suite that cannot run here (DEVELOPERS.md, "Tests"): not root, it says SKIPPED and
 * exits 0, or fails when PERIGEE_REQUIRE_ROOT_TESTS is set (.ci/run sets it). Call it before setting anything up.
 */
export function needsRoot(what) {
  if (process.getuid?.() === 0) return;
  if (process.env.PERIGEE_REQUIRE_ROOT_TESTS) {
    console.log(`FAILED: ${what} needs root (PERIGEE_REQUIRE_ROOT_TESTS is set: a test that cannot run fails)`);
    process.exit(1);
  }
  console.log(`SKIPPED: ${what} needs root (network namespaces)`);
  process.exit(0);
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

const children = [];

/** Spawns a long-running process in its own group, logging to a file. */
export function start(name, cmd, args, { env = {}, cwd, logFile } = {}) {
  const child = spawn(cmd, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const log = createWriteStream(logFile);
  child.stdout.pipe(log);
  child.stderr.pipe(log);
  child.name = name;
  children.push(child);
  child.on('exit', (code) => {
    child.exited = code ?? 'signal';
  });
  return child;
}

/** Stops every process started here: SIGTERM to its group, SIGKILL after a grace period. */
export async function stopAll() {
  await Promise.all(
    children.map(
      (c) =>
        new Promise((resolve) => {
          if (c.exitCode !== null || c.exited !== undefined) return resolve();
          const timer = setTimeout(() => {
            try {
              process.kill(-c.pid, 'SIGKILL');
            } catch {
              /* already gone */
            }
            resolve();
          }, 5000);
          c.once('exit', () => {
            clearTimeout(timer);
            resolve();
          });
          try {
            process.kill(-c.pid, 'SIGTERM');
          } catch {
            clearTimeout(timer);
            resolve();
          }
        }),
    ),
  );
}

/** Polls a URL until it answers (any HTTP status) or the time runs out. */
export async function waitForHttp(url, { timeoutMs = HUNG_MS, child } = {}) {
  const deadline = Date.now() + timeoutMs;
  let lastError;
  while (Date.now() < deadline) {
    if (child && child.exited !== undefined) throw new Error(`${child.name} exited (${child.exited}) before ${url} answered`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      return res;
    } catch (e) {
      lastError = e;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms: ${lastError}`);
}
