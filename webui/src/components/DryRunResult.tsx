import { Accordion, Alert, Text } from '@mantine/core';
import type { ValidateOut } from '../api/endpoints';
import { IssueList } from './IssueList';

/** What each rendered part is, in the operator's words. */
const PARTS: Record<string, string> = {
  nft: 'Firewall rules (nftables)',
  routes: 'Routes (ip)',
  sysctls: 'Kernel settings (sysctl)',
  shaping: 'Shaper (tc)',
  squid_conf: 'Squid configuration',
  unbound_conf: 'Resolver configuration (unbound)',
};

function asText(v: unknown): string {
  if (typeof v === 'string') return v;
  if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v.join('\n');
  if (v && typeof v === 'object') return Object.entries(v).map(([k, x]) => `${k} = ${String(x)}`).join('\n');
  return String(v);
}

/** A dry run's verdict first (would the gateway install it?), then the policy's warnings, then the files. */
export function DryRunResult({ result, onClose }: { result: ValidateOut; onClose: () => void }) {
  const rendered = Object.entries(result.rendered ?? {}).filter(([, v]) => v !== null && v !== undefined);
  const err = (result.error ?? {}) as { message?: string; field?: string };
  const warnings = result.issues ?? [];
  return (
    <Alert
      color={!result.ok ? 'red' : warnings.length ? 'yellow' : 'green'}
      withCloseButton
      closeButtonLabel="Dismiss"
      onClose={onClose}
      role="status"
      title={`Dry run of version ${result.version_id}`}
    >
      <Text fw={600} size="sm" mb="xs">
        {result.ok
          ? `Accepted: the gateway would install version ${result.version_id} as it is${warnings.length ? ', with the warnings below' : ''}.`
          : `Refused: the gateway would not install version ${result.version_id}${err.field ? ` (${err.field})` : ''}: ${err.message ?? 'no reason given'}.`}
      </Text>
      <IssueList issues={warnings} />
      {rendered.length > 0 && (
        <Accordion variant="contained" multiple>
          {rendered.map(([part, value]) => (
            <Accordion.Item key={part} value={part}>
              <Accordion.Control>{PARTS[part] ?? part}</Accordion.Control>
              <Accordion.Panel>
                <pre className="diff">{asText(value)}</pre>
              </Accordion.Panel>
            </Accordion.Item>
          ))}
        </Accordion>
      )}
    </Alert>
  );
}
