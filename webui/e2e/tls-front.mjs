// A hub's HTTPS front for the browser suites, as nginx is in production: TLS with a self-signed certificate made
// here, every request passed to the API on loopback with X-Real-IP set to the client's address. What a terminal's
// API pins is this certificate's key: `pin` is `sha256:` and the hex SHA-256 of its SubjectPublicKeyInfo.
import { createHash, X509Certificate } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:https';
import { join } from 'node:path';

/** A self-signed EC certificate for 127.0.0.1 in `dir`; its files and its key's pin. */
export function selfSigned(dir) {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const keyFile = join(dir, 'key.pem');
  const certFile = join(dir, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
    '-subj', '/CN=perigee-e2e-hub', '-addext', 'subjectAltName=IP:127.0.0.1',
    '-keyout', keyFile, '-out', certFile], { stdio: 'ignore' });
  const spki = new X509Certificate(readFileSync(certFile)).publicKey.export({ type: 'spki', format: 'der' });
  return { keyFile, certFile, pin: `sha256:${createHash('sha256').update(spki).digest('hex')}` };
}

/** Serves HTTPS on a free loopback port, passing every request to `apiUrl` (http). Resolves to its URL and a stop. */
export async function startTlsFront(dir, apiUrl) {
  const { keyFile, certFile, pin } = selfSigned(dir);
  const upstream = new URL(apiUrl);
  const server = createServer({ key: readFileSync(keyFile), cert: readFileSync(certFile) }, (req, res) => {
    const headers = { ...req.headers, 'x-real-ip': req.socket.remoteAddress ?? '' };
    const up = request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    up.on('error', (e) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`tls front: ${e.message}`);
    });
    req.pipe(up);
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address();
  return {
    url: `https://127.0.0.1:${port}`,
    pin,
    stop: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
