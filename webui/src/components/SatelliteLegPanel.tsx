import { Badge, Group, Paper, SimpleGrid, Table, Text, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useMemo } from 'react';
import { endpoints, type SatelliteStats } from '../api/endpoints';
import { keys } from '../api/keys';
import { LazyTimeSeriesChart } from '../charts/LazyChart';
import { CC_REASON, formatRetransmit } from '../lib/flows';
import { describeRange, type TimeRange } from '../lib/ranges';
import { seriesToRows } from '../lib/series';
import { PeerPathCounters } from './PeerPathCounters';

/** The API's key for the retransmission rate of every split flow together (stats.ALL_KEY). */
export const ALL_FLOWS = 'all';
const PALETTE = ['teal', 'grape', 'orange', 'cyan', 'lime', 'pink'];

/** The chart's lines: every split flow, then each congestion control the range saw. */
export function retransmitLines(keysSeen: readonly string[]): { key: string; label: string; color: string }[] {
  const ccs = keysSeen.filter((k) => k !== ALL_FLOWS).sort();
  return [
    { key: ALL_FLOWS, label: 'all split flows', color: 'var(--mantine-color-indigo-6)' },
    ...ccs.map((cc, i) => ({ key: cc, label: cc, color: `var(--mantine-color-${PALETTE[i % PALETTE.length]}-6)` })),
  ];
}

function SplitTable({ stats }: { stats: SatelliteStats }) {
  const since = new Map(stats.by_congestion_control.map((c) => [c.key, c]));
  const reasons = new Map(stats.by_cc_reason.map((c) => [c.key, c]));
  const ccs = [...new Set([...stats.live.map((l) => l.cc), ...since.keys()])].sort();
  return (
    <Table aria-label="Flows by satellite congestion control" verticalSpacing={4} fz="sm">
      <Table.Thead>
        <Table.Tr>
          <Table.Th>Congestion control</Table.Th>
          <Table.Th>Live flows, by why</Table.Th>
          <Table.Th ta="right">Since start</Table.Th>
          <Table.Th ta="right">Retransmitted</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {ccs.map((cc) => {
          const total = since.get(cc);
          return (
            <Table.Tr key={cc}>
              <Table.Td className="mono">{cc}</Table.Td>
              <Table.Td>
                <Group gap={4}>
                  {stats.live
                    .filter((l) => l.cc === cc)
                    .map((l) => (
                      <Badge key={l.cc_reason} size="sm" variant="light" color={CC_REASON[l.cc_reason].color} title={CC_REASON[l.cc_reason].means} style={{ flex: 'none', overflow: 'visible' }}>
                        {l.flows} {CC_REASON[l.cc_reason].badge}
                      </Badge>
                    ))}
                </Group>
              </Table.Td>
              <Table.Td ta="right">{total ? total.flows.toLocaleString() : '—'}</Table.Td>
              <Table.Td ta="right">{formatRetransmit(total?.retransmit_pct)}</Table.Td>
            </Table.Tr>
          );
        })}
      </Table.Tbody>
      <Table.Caption>
        Why, since start:{' '}
        {[...reasons.entries()]
          .map(([reason, c]) => `${CC_REASON[reason as keyof typeof CC_REASON]?.badge ?? reason} ${c.flows.toLocaleString()} flows, ${formatRetransmit(c.retransmit_pct)} retransmitted`)
          .join(' · ') || '—'}
      </Table.Caption>
    </Table>
  );
}

/** The satellite leg on the Overview: its retransmission rate over the range (the API's rollups), which
 * congestion control the flows run and why (the gateway's counters and the live flows), and the peer path's
 * counters. */
export function SatelliteLegPanel({ range }: { range: TimeRange }) {
  const series = useQuery({
    queryKey: keys.series({ metric: 'sat_retrans_pct', range: range.value }),
    queryFn: () => endpoints.series('sat_retrans_pct', Math.floor(Date.now() / 1000) - range.seconds),
    refetchInterval: range.refreshMs,
  });
  const split = useQuery({ queryKey: keys.satelliteStats, queryFn: endpoints.satelliteStats, refetchInterval: 5000 });
  const rows = useMemo(() => seriesToRows(series.data), [series.data]);
  const lines = retransmitLines(series.data?.series.map((s) => s.key) ?? []);
  const empty = split.data && split.data.live.length === 0 && split.data.by_congestion_control.length === 0;
  return (
    <SimpleGrid cols={{ base: 1, md: 2 }}>
      <Paper withBorder p="sm" component="section" aria-label="Satellite leg retransmissions">
        <Title order={3} size="h5" mb="xs">
          Satellite leg retransmissions
        </Title>
        <LazyTimeSeriesChart
          label={`Share of the satellite leg's segments retransmitted, per congestion control, ${describeRange(range)}`}
          data={rows}
          format={(v) => formatRetransmit(v)}
          series={lines}
        />
      </Paper>
      <Paper withBorder p="sm" component="section" aria-label="Satellite congestion control">
        <Title order={3} size="h5" mb="xs">
          Satellite congestion control
        </Title>
        {split.error ? (
          <Text c="red" size="sm">Unavailable: {String(split.error)}</Text>
        ) : empty ? (
          <Text c="dimmed" size="sm">No split flow has reported its satellite leg yet (an older gateway does not report it).</Text>
        ) : split.data ? (
          <SplitTable stats={split.data} />
        ) : null}
      </Paper>
      {split.data ? (
        <Paper withBorder p="sm" component="section" aria-label="Peer path counters">
          <Title order={3} size="h5" mb="xs">
            Peer path
          </Title>
          <PeerPathCounters peer={split.data.peer ?? null} />
        </Paper>
      ) : null}
    </SimpleGrid>
  );
}
