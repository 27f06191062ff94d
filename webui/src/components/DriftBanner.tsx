import { Alert, Button, Code, Group, List, Text } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Link } from 'react-router-dom';
import { endpoints, type DiffEntry, type RunningOut } from '../api/endpoints';
import { errorMessage } from '../api/errors';
import { afterConfigChange, keys } from '../api/keys';
import { useCan } from '../auth/roles';

/** Shown changes; the rest is one click away in Config history. */
const SHOWN = 5;

/** A value short enough for one line: the full diff is in Config history. */
function value(v: unknown): string {
  if (v === null || v === undefined) return '—';
  const text = JSON.stringify(v);
  return text.length > 60 ? `${text.slice(0, 57)}…` : text;
}

function Change({ c }: { c: DiffEntry }) {
  const path = c.path.replace(/^\$\./, '');
  if (c.op === 'added') return <><Code>{path}</Code> added: {value(c.new)}</>;
  if (c.op === 'removed') return <><Code>{path}</Code> removed (was {value(c.old)})</>;
  return <><Code>{path}</Code>: {value(c.old)} → {value(c.new)}</>;
}

/** What the gateway runs, said plainly. */
function runsText(r: RunningOut): string {
  if (!r.reachable) return `The gateway cannot be asked what it runs${r.error ? `: ${r.error}` : ''}.`;
  if (r.revision == null) return 'The gateway runs no config yet: nothing is intercepted.';
  const rev = r.revision ? ` (revision ${r.revision})` : '';
  return r.version_id != null ? `The gateway runs version ${r.version_id}${rev}.` : `The gateway runs a config${rev} the API could not record: ${r.error ?? ''}`;
}

/** Whenever what the gateway runs is not the desired (latest) version: what runs, the diff, a one-click apply.
 * The desired version is never shown as the current state while the gateway runs something else. */
export function DriftBanner() {
  const queryClient = useQueryClient();
  const canApply = useCan()('operator');
  const running = useQuery({ queryKey: keys.running, queryFn: endpoints.running, refetchInterval: 10_000 });
  const apply = useMutation({
    mutationFn: (id: number) => endpoints.applyVersion(id, 'applied from the dashboard'),
    onSettled: () => Promise.all(afterConfigChange.map((k) => queryClient.invalidateQueries({ queryKey: k }))),
  });
  const r = running.data;
  if (!r || r.in_sync || r.desired_version_id == null) return null;
  const desired = r.desired_version_id;
  const failed = apply.data && !apply.data.ok;
  return (
    <Alert color={failed || !r.reachable ? 'red' : 'yellow'} mb="md" title={`Version ${desired} is not applied`} role="status">
      <Text size="sm">
        {runsText(r)}{' '}
        {failed && `Apply failed: ${String(apply.data?.error?.message ?? 'see Config history')}`}
        {apply.error && `Apply failed: ${errorMessage(apply.error)}`}
      </Text>
      {r.revision != null && r.changes.length > 0 && (
        <>
          <Text size="sm" mt="xs">
            Applying version {desired} changes:
          </Text>
          <List size="sm" spacing={2} aria-label="Changes the desired version makes" style={{ overflowWrap: 'anywhere' }}>
            {r.changes.slice(0, SHOWN).map((c) => (
              <List.Item key={`${c.op}${c.path}`}>
                <Change c={c} />
              </List.Item>
            ))}
            {r.changes.length > SHOWN && <List.Item>and {r.changes.length - SHOWN} more</List.Item>}
          </List>
        </>
      )}
      <Group gap="xs" mt="xs" justify="flex-end">
        <Button component={Link} to={`/history?a=${r.version_id ?? desired}&b=${desired}`} variant="default" size="xs">
          Review diff
        </Button>
        {canApply && (
          <Button size="xs" loading={apply.isPending} disabled={!r.reachable} onClick={() => apply.mutate(desired)}>
            Apply version {desired}
          </Button>
        )}
      </Group>
    </Alert>
  );
}
