import { Alert } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { endpoints } from '../api/endpoints';
import { keys } from '../api/keys';

/** On a page whose edits add to the desired version: says so when that version is not what the gateway runs,
 * so nobody applies pending changes along with their own without knowing. */
export function PendingNotice() {
  const running = useQuery({ queryKey: keys.running, queryFn: endpoints.running, refetchInterval: 10_000 });
  const r = running.data;
  if (!r || r.in_sync || r.desired_version_id == null || r.revision == null) return null;
  return (
    <Alert color="yellow" variant="outline" mb="md" role="note" title="Changes here build on a pending version">
      A change made here is added to version {r.desired_version_id}, which the gateway does not run yet (it runs{' '}
      {r.version_id != null ? `version ${r.version_id}` : 'another config'}). Applying it applies the pending changes too; see the
      banner above for what they are.
    </Alert>
  );
}
