// What a terminal needs to join its hub: the hub's HTTPS address, the pin of the hub's HTTPS key and a one-time
// enrollment token. The same three go into the terminal dashboard's "Join a hub" form or, for a zero-touch
// start, into a file the terminal's API reads at start (PERIGEE_JOIN_FILE).

export interface JoinFile {
  hub_url: string;
  hub_pin: string;
  token: string;
}

/** The hub's HTTPS key pin: `sha256:` and the 64 hex digits of the SHA-256 of its SubjectPublicKeyInfo. */
export const HUB_PIN_RE = /^sha256:[0-9a-f]{64}$/;

/** `https://host[:port]`, nothing after it. */
export const HUB_URL_RE = /^https:\/\/[^/\s?#]+$/;

/** Where the join file goes on a packaged terminal: the API's data dir, which it may rename the file in. */
export const JOIN_FILE_PATH = '/var/lib/perigee/join.json';

/** The pin of a hub's HTTPS key, computed on the hub from the certificate nginx serves (packaged path). */
export const PIN_COMMAND =
  "openssl x509 -in /etc/perigee/tls/cert.pem -pubkey -noout | openssl pkey -pubin -outform der | sha256sum | sed 's/^/sha256:/; s/ .*//'";

/** The hub's own URL as the browser reached it, a suggestion: https only, no path. */
export function suggestedHubUrl(origin: string): string {
  return origin.startsWith('https://') ? origin : '';
}

export function joinFileText(j: JoinFile): string {
  return `${JSON.stringify({ hub_url: j.hub_url, hub_pin: j.hub_pin, token: j.token }, null, 2)}\n`;
}

/** Shell lines that put the join file on a packaged terminal and restart its API, which joins and renames it. */
export function joinCommands(j: JoinFile): string {
  return [
    `sudo install -m 600 -o perigee -g perigee /dev/stdin ${JOIN_FILE_PATH} <<'EOF'`,
    joinFileText(j).trimEnd(),
    'EOF',
    `echo 'PERIGEE_JOIN_FILE=${JOIN_FILE_PATH}' | sudo tee -a /etc/perigee/api.env`,
    'sudo systemctl restart perigee-api',
  ].join('\n');
}

/** What is wrong with a join's hub address and pin, by field (empty when both are well-formed). */
export function checkJoin(j: Pick<JoinFile, 'hub_url' | 'hub_pin'>): Partial<Record<'hub_url' | 'hub_pin', string>> {
  const out: Partial<Record<'hub_url' | 'hub_pin', string>> = {};
  if (!HUB_URL_RE.test(j.hub_url.trim())) out.hub_url = 'https://host or https://host:port, nothing after it';
  if (!HUB_PIN_RE.test(j.hub_pin.trim())) out.hub_pin = 'sha256: and 64 lowercase hex digits (the SHA-256 of the hub certificate’s public key)';
  return out;
}
