import { Anchor, Badge, Button, Group, Pagination, Select, Table, Text, TextInput } from '@mantine/core';
import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { useSearchParams } from 'react-router-dom';
import { endpoints, flowHistoryCsvUrl, type ClassAction, type FlowHistoryFilter, type FlowPath } from '../api/endpoints';
import { formatBytes, formatDuration, formatMs, formatTime } from '../lib/format';
import { PATH_CHOICES, PATH_LABEL, RELAY_LABEL } from '../lib/flows';
import { choices } from '../lib/system-config';
import { ScrollTable } from './ScrollTable';
import { EmptyState, QueryView } from './StateViews';

const PAGE = 50;
type ActionFilter = ClassAction;
type PathFilter = FlowPath;
/** The text filters, kept in the URL so the Sites page can link here with one set. */
const TEXT_FILTERS = ['client', 'server', 'class', 'site'] as const;
type TextFilter = (typeof TEXT_FILTERS)[number];

const LABEL: Record<TextFilter, { label: string; placeholder: string }> = {
  client: { label: 'Client', placeholder: 'client IP, e.g. 192.0.2.10' },
  server: { label: 'Server', placeholder: 'server IP' },
  class: { label: 'Class', placeholder: 'class name' },
  site: { label: 'Site', placeholder: 'site name or other' },
};

/** Closed flows as the API stored them, newest first, with the filters the CSV export applies too. */
export function ClosedFlows() {
  const [params, setParams] = useSearchParams();
  const [page, setPage] = useState(1);
  const [action, setAction] = useState<ActionFilter | null>(null);
  const [path, setPath] = useState<PathFilter | null>(null);
  const text = Object.fromEntries(TEXT_FILTERS.map((k) => [k, params.get(k) ?? ''])) as Record<TextFilter, string>;
  const setText = (k: TextFilter, v: string) => {
    setParams(
      (p) => {
        const next = new URLSearchParams(p);
        if (v) next.set(k, v);
        else next.delete(k);
        return next;
      },
      { replace: true },
    );
    setPage(1);
  };
  const filter: FlowHistoryFilter = {
    action: action ?? undefined,
    path: path ?? undefined,
    ...Object.fromEntries(TEXT_FILTERS.filter((k) => text[k].trim()).map((k) => [k, text[k].trim()])),
  };
  const query = { ...filter, limit: PAGE, offset: (page - 1) * PAGE };
  const history = useQuery({
    queryKey: ['flows', 'history', query],
    queryFn: () => endpoints.flowHistory(query),
    placeholderData: keepPreviousData,
    refetchInterval: 10000,
  });
  return (
    <>
      <Group mb="sm" align="flex-end" wrap="wrap">
        {TEXT_FILTERS.map((k) => (
          <TextInput
            key={k}
            label={LABEL[k].label}
            placeholder={LABEL[k].placeholder}
            value={text[k]}
            onChange={(e) => setText(k, e.currentTarget.value)}
            w={k === 'client' || k === 'server' ? 190 : 150}
          />
        ))}
        <Select label="Action" clearable placeholder="any" data={choices('Action')} value={action} onChange={(v) => { setAction(v as ActionFilter | null); setPage(1); }} w={150} />
        <Select
          label="Path"
          clearable
          placeholder="any"
          data={PATH_CHOICES}
          value={path}
          onChange={(v) => { setPath(v as PathFilter | null); setPage(1); }}
          w={140}
        />
        <Button component="a" href={flowHistoryCsvUrl(filter)} download variant="default" aria-label="Export the filtered flows as CSV">
          Export CSV
        </Button>
      </Group>
      <QueryView
        query={history}
        isEmpty={(d) => d.flows.length === 0}
        empty={<EmptyState title={Object.values(filter).some(Boolean) ? 'No closed flow matches these filters' : 'No closed flows recorded yet'} />}
      >
        {(d) => (
          <>
            <ScrollTable
              minWidth={980}
              columns={['Ended', 'Client', 'Server', 'Site', 'Class', 'Action', 'Path', 'Duration', 'Satellite ↓/↑', 'Sat RTT', 'End']}
              striped
              aria-label="Closed flows"
              fz="sm"
              verticalSpacing={4}
            >
              {d.flows.map((f) => (
                <Table.Tr key={f.id}>
                  <Table.Td style={{ whiteSpace: 'nowrap' }}>{formatTime(f.ended_at)}</Table.Td>
                  <Table.Td className="mono">{f.client}</Table.Td>
                  <Table.Td className="mono">{f.server}</Table.Td>
                  <Table.Td>
                    {f.site ? (
                      <Anchor component="button" type="button" size="sm" onClick={() => setText('site', f.site ?? '')}>
                        {f.site}
                      </Anchor>
                    ) : (
                      '—'
                    )}
                  </Table.Td>
                  <Table.Td>{f.class ?? '—'}</Table.Td>
                  <Table.Td>
                    <Badge size="sm" variant="light" title={f.relay ? RELAY_LABEL[f.relay] : undefined}>
                      {f.action ?? '—'}
                      {f.relay === 'squid' ? ' · squid' : ''}
                    </Badge>
                  </Table.Td>
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
