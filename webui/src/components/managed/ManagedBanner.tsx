import { Alert, Text } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { managedEndpoints, managedKeys, type ManagedStatus } from '../../api/managed';
import { formatTime } from '../../lib/format';

/** How the link to the hub stands, in one line: last contact, the newest hub version and its outcome, an error. */
export function ManagedLine({ s }: { s: ManagedStatus }) {
  return (
    <Text size="sm">
      Last contact {s.last_contact_at ? formatTime(s.last_contact_at) : 'not yet'}.{' '}
      {s.hub_version_id != null ? `Hub version ${s.hub_version_id}: ${(s.outcome ?? 'pending').replace('_', ' ')}.` : 'No version from the hub yet.'}
      {s.last_error && ` Last error: ${s.last_error}`}
    </Text>
  );
}

/** On every page of a managed terminal: which hub manages it, under which name. Nothing otherwise. */
export function ManagedBanner() {
  const status = useQuery({ queryKey: managedKeys.status, queryFn: managedEndpoints.status, refetchInterval: 10_000, retry: false });
  const s = status.data;
  if (!s?.managed) return null;
  return (
    <Alert color={s.last_error ? 'orange' : 'blue'} mb="md" role="status" title={`Managed from the hub ${s.hub_url ?? '?'} as ${s.name ?? '?'}`} data-testid="managed-banner">
      <ManagedLine s={s} />
    </Alert>
  );
}
