import { Badge, Button, Group, Pagination, Table, Text, TextInput } from '@mantine/core';
import { useDebouncedValue } from '@mantine/hooks';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { endpoints } from '../api/endpoints';
import { keys } from '../api/keys';
import { PageHeader } from '../components/PageHeader';
import { ScrollTable } from '../components/ScrollTable';
import { EmptyState, QueryView } from '../components/StateViews';
import { formatTime } from '../lib/format';

const PAGE = 50;

export default function AuditPage() {
  const [actor, setActor] = useState('');
  const [action, setAction] = useState('');
  const [page, setPage] = useState(1);
  const [filter] = useDebouncedValue({ actor: actor.trim(), action: action.trim() }, 300);
  const query = { actor: filter.actor || undefined, action: filter.action || undefined, limit: PAGE, offset: (page - 1) * PAGE };
  const audit = useQuery({ queryKey: keys.audit(query), queryFn: () => endpoints.audit(query), placeholderData: keepPreviousData, refetchInterval: 10000 });

  return (
    <>
      <PageHeader title="Audit log" description="Every login and every change, with who, from where and the outcome." />
      <Group mb="md" align="flex-end" wrap="wrap">
        <TextInput label="Actor" placeholder="exact username" value={actor} onChange={(e) => { setActor(e.currentTarget.value); setPage(1); }} />
        <TextInput label="Action contains" placeholder="e.g. bypass or login" value={action} onChange={(e) => { setAction(e.currentTarget.value); setPage(1); }} />
        <Button variant="default" onClick={() => { setActor(''); setAction(''); setPage(1); }}>
          Clear
        </Button>
      </Group>
      <QueryView query={audit} isEmpty={(d) => d.entries.length === 0} empty={<EmptyState title="No audit entries match" />}>
        {(data) => (
          <>
            <ScrollTable minWidth={800} columns={['Time', 'Actor', 'From', 'Action', 'Result', 'Detail']} striped aria-label="Audit entries" verticalSpacing={4} fz="sm">
              {data.entries.map((e) => (
                <Table.Tr key={e.id}>
                  <Table.Td style={{ whiteSpace: 'nowrap' }}>{formatTime(e.ts)}</Table.Td>
                  <Table.Td>{e.actor}</Table.Td>
                  <Table.Td className="mono">{e.address}</Table.Td>
                  <Table.Td className="mono">{e.action}</Table.Td>
                  <Table.Td>
                    <Badge size="sm" variant="light" color={e.result === 'ok' ? 'green' : 'red'}>
                      {e.result}
                    </Badge>
                  </Table.Td>
                  <Table.Td>
                    <Text size="xs" className="mono" lineClamp={2} title={e.detail ? JSON.stringify(e.detail) : undefined}>
                      {e.detail ? JSON.stringify(e.detail) : ''}
                    </Text>
                  </Table.Td>
                </Table.Tr>
              ))}
            </ScrollTable>
            <Group justify="space-between" mt="md">
              <Text size="sm" c="dimmed">
                {data.total.toLocaleString()} entries
              </Text>
              <Pagination total={Math.max(1, Math.ceil(data.total / PAGE))} value={page} onChange={setPage} getControlProps={(c) => ({ 'aria-label': `${c} page` })} />
            </Group>
          </>
        )}
      </QueryView>
    </>
  );
}
