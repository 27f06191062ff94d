// The satlab side of the satlab end-to-end suite: bring the lab up and down, run transfers through the
// emulated satellite, read the real gateway's control socket. Every command is an argv array (no shell).
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { controlGet } from './control.mjs';

export const CLIENT = '10.71.1.10';
export const SERVER = '10.71.3.10';
export const BULK_PORT = 5001;

function run(cmd, args, { timeoutMs = 120000 } = {}) {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { timeout: timeoutMs, maxBuffer: 4 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${[cmd, ...args].join(' ')} failed (${err.code ?? err.signal}): ${stderr || stdout}`));
      else resolve(stdout);
    });
  });
}

export class Lab {
  constructor(repo, prefix) {
    this.repo = repo;
    this.prefix = prefix;
    this.satlab = join(repo, 'bin', 'satlab');
    this.perigee = join(repo, 'bin', 'perigee');
    this.socket = `/run/satlab/${prefix}/gw-${prefix}hub.sock`;
    this.running = new Set();
  }

  /** Loads Perigee's BPF Hybla (idempotent), then the lab with the splitter daemon in the hub; with
   * `unconfigured` the daemon starts without a config (a new box). */
  async up(profile, { unconfigured = false } = {}) {
    await run(this.perigee, ['hybla', 'load']);
    await this.down(); // a lab left behind by an interrupted run
    const args = ['--prefix', this.prefix, 'up', '--profile', profile, '--gateway', 'hub', ...(unconfigured ? ['--unconfigured'] : [])];
    return run(this.satlab, args, { timeoutMs: 90000 });
  }

  async down() {
    for (const child of this.running) child.kill('SIGKILL');
    await run(this.satlab, ['--prefix', this.prefix, 'down'], { timeoutMs: 60000 }); // idempotent
  }

  /** `satlab bulk client get SIZE`: resolves to its JSON report once the transfer has ended. */
  bulkGet(size, port = BULK_PORT) {
    return this.#json(['bulk', 'client', 'get', size, '--server', SERVER, '--port', String(port), '--json']);
  }

  /** `satlab fetch client http://SERVER/bytes/N` (port 80), body discarded. */
  fetchBytes(n) {
    return this.#json(['fetch', 'client', `http://${SERVER}/bytes/${n}`, '--out', '/dev/null', '--json']);
  }

  #json(args) {
    return new Promise((resolve, reject) => {
      const child = execFile(this.satlab, ['--prefix', this.prefix, ...args], { timeout: 90000, maxBuffer: 4 << 20 }, (err, stdout, stderr) => {
        this.running.delete(child);
        if (err) return reject(new Error(`satlab ${args.join(' ')} failed: ${stderr || stdout}`));
        try {
          resolve(JSON.parse(stdout.trim().split('\n').pop()));
        } catch (e) {
          reject(new Error(`satlab ${args.join(' ')}: no JSON report: ${stdout} ${e}`));
        }
      });
      this.running.add(child);
    });
  }

  /** GET on the real daemon's control socket (docs/control-protocol.md). */
  gateway(path) {
    return controlGet(this.socket, path);
  }
}
