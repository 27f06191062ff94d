import { Badge, Button, Code, Group, Table, Text } from '@mantine/core';
import { useState } from 'react';
import type { ManagedState, ManagedVersion } from '../../api/managed';
import { formatTime } from '../../lib/format';
import { ScrollTable } from '../ScrollTable';
import { CancelVersionModal } from './CancelVersionModal';

const STATE: Record<ManagedState, { color: string; label: string }> = {
  pending: { color: 'blue', label: 'pending' },
  applied: { color: 'green', label: 'applied' },
  rolled_back: { color: 'orange', label: 'rolled back' },
  refused: { color: 'red', label: 'refused' },
  cancelled: { color: 'gray', label: 'cancelled' },
  superseded: { color: 'gray', label: 'superseded' },
};

export function StateBadge({ state }: { state: ManagedState }) {
  const s = STATE[state] ?? { color: 'gray', label: state };
  return <Badge color={s.color}>{s.label}</Badge>;
}

/** Only a version the terminal has not been sent yet can be cancelled (the API refuses any other with 409). */
const cancellable = (v: ManagedVersion) => v.state === 'pending' && v.delivered_at == null;

/** The config versions the hub made for one terminal, newest first, with what the terminal reported of each;
 * an admin (`canCancel`) may cancel one not sent yet. */
export function ManagedVersionTable({ terminal, versions, canCancel = false }: { terminal: string; versions: ManagedVersion[]; canCancel?: boolean }) {
  const [cancelling, setCancelling] = useState<ManagedVersion | null>(null);
  if (versions.length === 0) return <Text c="dimmed">No version was made for it yet.</Text>;
  return (
    <>
      <ScrollTable minWidth={860} columns={['Version', 'Sections', 'State', 'Made', 'Reported', 'Comment']} actions={canCancel} striped aria-label="Its config versions">
        {versions.map((v) => (
          <Table.Tr key={v.id} data-version={v.id}>
            <Table.Td fw={600}>{v.id}</Table.Td>
            <Table.Td>
              <Group gap={4}>
                {v.sections.map((s) => (
                  <Code key={s}>{s}</Code>
                ))}
              </Group>
            </Table.Td>
            <Table.Td>
              <StateBadge state={v.state} />
              {v.state === 'pending' && (
                <Text size="xs" c="dimmed" mt={2}>
                  {v.delivered_at ? `sent ${formatTime(v.delivered_at)}` : 'not sent yet'}
                </Text>
              )}
              {v.error && (
                <Text size="xs" c={v.state === 'cancelled' || v.state === 'superseded' ? 'dimmed' : 'red'} mt={2} style={{ overflowWrap: 'anywhere' }}>
                  {v.error}
                </Text>
              )}
            </Table.Td>
            <Table.Td>
              <Text size="sm">{formatTime(v.created_at)}</Text>
              <Text size="xs" c="dimmed">
                by {v.created_by}
              </Text>
            </Table.Td>
            <Table.Td>{v.reported_at ? formatTime(v.reported_at) : '—'}</Table.Td>
            <Table.Td>{v.comment || '—'}</Table.Td>
            {canCancel && (
              <Table.Td>
                {cancellable(v) && (
                  <Button size="xs" variant="light" color="red" onClick={() => setCancelling(v)} aria-label={`Cancel version ${v.id}`}>
                    Cancel
                  </Button>
                )}
              </Table.Td>
            )}
          </Table.Tr>
        ))}
      </ScrollTable>
      {cancelling && <CancelVersionModal terminal={terminal} version={cancelling} onClose={() => setCancelling(null)} />}
    </>
  );
}
