import { Badge, Group, Pagination, Select, Table, Text } from '@mantine/core';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { endpoints } from '../api/endpoints';
import { formatBytes, formatDuration, formatMs, formatTime } from '../lib/format';
import { PATH_LABEL } from '../lib/flows';
import { ScrollTable } from './ScrollTable';
import { EmptyState, QueryView } from './StateViews';

const PAGE = 50;
type ActionFilter = 'accelerate' | 'cache' | 'bypass';
type PathFilter = 'direct' | 'peer';

/** Closed flows as the API stored them, newest first. */
export function ClosedFlows() {
  const [page, setPage] = useState(1);
  const [action, setAction] = useState<ActionFilter | null>(null);
  const [path, setPath] = useState<PathFilter | null>(null);
  const query = { limit: PAGE, offset: (page - 1) * PAGE, action: action ?? undefined, path: path ?? undefined };
  const history = useQuery({
    queryKey: ['flows', 'history', query],
    queryFn: () => endpoints.flowHistory(query),
    placeholderData: keepPreviousData,
    refetchInterval: 10000,
  });
  return (
    <>
      <Group mb="sm" align="flex-end">
        <Select label="Action" clearable placeholder="any" data={['accelerate', 'cache', 'bypass']} value={action} onChange={(v) => { setAction(v as ActionFilter | null); setPage(1); }} w={180} />
        <Select
          label="Path"
          clearable
          placeholder="any"
          data={[{ value: 'direct', label: PATH_LABEL.direct }, { value: 'peer', label: PATH_LABEL.peer }]}
          value={path}
          onChange={(v) => { setPath(v as PathFilter | null); setPage(1); }}
          w={160}
        />
      </Group>
      <QueryView query={history} isEmpty={(d) => d.flows.length === 0} empty={<EmptyState title="No closed flows recorded yet" />}>
        {(d) => (
          <>
            <ScrollTable minWidth={760} columns={['Ended', 'Client', 'Server', 'Class', 'Action', 'Path', 'Duration', 'Bytes ↓/↑', 'Sat RTT', 'End']} striped aria-label="Closed flows" fz="sm" verticalSpacing={4}>
              {d.flows.map((f) => (
                <Table.Tr key={f.id}>
                  <Table.Td style={{ whiteSpace: 'nowrap' }}>{formatTime(f.ended_at)}</Table.Td>
                  <Table.Td className="mono">{f.client}</Table.Td>
                  <Table.Td className="mono">{f.server}</Table.Td>
                  <Table.Td>{f.class ?? '—'}</Table.Td>
                  <Table.Td><Badge size="sm" variant="light">{f.action ?? '—'}</Badge></Table.Td>
                  <Table.Td>{f.path ? (PATH_LABEL[f.path] ?? f.path) : '—'}</Table.Td>
                  <Table.Td>{formatDuration(f.ended_at - f.started_at)}</Table.Td>
                  <Table.Td>{formatBytes(f.bytes_down)} / {formatBytes(f.bytes_up)}</Table.Td>
                  <Table.Td>{formatMs(f.sat_srtt_us)}</Table.Td>
                  <Table.Td>{f.end_reason ?? '—'}</Table.Td>
                </Table.Tr>
              ))}
            </ScrollTable>
            <Group justify="space-between" mt="sm">
              <Text size="sm" c="dimmed">{d.total.toLocaleString()} closed flows</Text>
              <Pagination total={Math.max(1, Math.ceil(d.total / PAGE))} value={page} onChange={setPage} />
            </Group>
          </>
        )}
      </QueryView>
    </>
  );
}
