// The end-to-end suites' one client of a gateway's control protocol (docs/control-protocol.md): GET on the
// daemon's Unix socket, the JSON answer, an Error naming the path for anything but 200 or no answer in time.
import { request } from 'node:http';

/** GET `path` on the control socket `socket`; resolves to the parsed JSON body. */
export function controlGet(socket, path, { timeoutMs = 30000 } = {}) {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: socket, path, method: 'GET', headers: { Host: 'perigee' }, timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () => {
        if (res.statusCode !== 200) return reject(new Error(`gateway GET ${path}: ${res.statusCode} ${body}`));
        try {
          resolve(JSON.parse(body));
        } catch (e) {
          reject(new Error(`gateway GET ${path}: not JSON: ${e.message}`));
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error(`gateway GET ${path}: no answer in ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}
