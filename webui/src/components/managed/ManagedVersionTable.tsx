import { Badge, Code, Group, Table, Text } from '@mantine/core';
import type { ManagedState, ManagedVersion } from '../../api/managed';
import { formatTime } from '../../lib/format';
import { ScrollTable } from '../ScrollTable';

const STATE: Record<ManagedState, { color: string; label: string }> = {
  pending: { color: 'blue', label: 'pending' },
  applied: { color: 'green', label: 'applied' },
  rolled_back: { color: 'orange', label: 'rolled back' },
  refused: { color: 'red', label: 'refused' },
};

export function StateBadge({ state }: { state: ManagedState }) {
  const s = STATE[state] ?? { color: 'gray', label: state };
  return <Badge color={s.color}>{s.label}</Badge>;
}

/** The config versions the hub made for one terminal, newest first, with what the terminal reported of each. */
export function ManagedVersionTable({ versions }: { versions: ManagedVersion[] }) {
  if (versions.length === 0) return <Text c="dimmed">No version was made for it yet.</Text>;
  return (
    <ScrollTable minWidth={860} columns={['Version', 'Sections', 'State', 'Made', 'Reported', 'Comment']} striped aria-label="Its config versions">
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
            {v.error && (
              <Text size="xs" c="red" mt={2} style={{ overflowWrap: 'anywhere' }}>
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
        </Table.Tr>
      ))}
    </ScrollTable>
  );
}
