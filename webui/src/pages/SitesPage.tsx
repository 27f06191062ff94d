import { Anchor, Badge, Group, Paper, SimpleGrid, Stack, Table, Text, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import type { ReactNode } from 'react';
import { Link } from 'react-router-dom';
import { endpoints, type Metric, type TalkersBy, type TopTalkersOut } from '../api/endpoints';
import { keys } from '../api/keys';
import { LazyTimeSeriesChart } from '../charts/LazyChart';
import { PageHeader } from '../components/PageHeader';
import { RangePicker, useRange } from '../components/RangePicker';
import { ScrollTable } from '../components/ScrollTable';
import { EmptyState, QueryView } from '../components/StateViews';
import { savingsWords } from '../lib/cache';
import { formatBps, formatBytes } from '../lib/format';
import { gatewayHealth } from '../lib/health';
import { describeRange, type TimeRange } from '../lib/ranges';
import { seriesToRows } from '../lib/series';

const PALETTE = ['indigo', 'teal', 'orange', 'grape', 'cyan', 'red', 'lime', 'pink', 'blue', 'yellow'].map(
  (c) => `var(--mantine-color-${c}-6)`,
);

function useSiteSeries(metric: Metric, range: TimeRange) {
  return useQuery({
    queryKey: keys.series({ metric, range: range.value }),
    queryFn: () => endpoints.series(metric, Math.floor(Date.now() / 1000) - range.seconds),
    refetchInterval: range.refreshMs,
  });
}

function SiteChart({ title, metric, range, format, integer }: { title: string; metric: Metric; range: TimeRange; format: (v: number) => string; integer?: boolean }) {
  const q = useSiteSeries(metric, range);
  const keysOf = (q.data?.series ?? []).map((s) => s.key).sort();
  return (
    <Paper withBorder p="sm" component="section" aria-label={title}>
      <Title order={3} size="h5" mb="xs">
        {title}
      </Title>
      <LazyTimeSeriesChart
        label={`${title} per site, ${describeRange(range)}`}
        data={seriesToRows(q.data)}
        format={format}
        integer={integer}
        series={keysOf.map((k, i) => ({ key: k, label: k, color: PALETTE[i % PALETTE.length] }))}
      />
    </Paper>
  );
}

function TalkersTable({ title, data, by }: { title: string; data: TopTalkersOut; by: TalkersBy }): ReactNode {
  return (
    <Paper withBorder p="sm" component="section" aria-label={title}>
      <Title order={3} size="h5" mb="xs">
        {title}
      </Title>
      {data.talkers.length === 0 ? (
        <EmptyState title="No traffic in this range" />
      ) : (
        <Table aria-label={title} fz="sm" verticalSpacing={4}>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>{by === 'site' ? 'Site' : 'Client'}</Table.Th>
              {by === 'client' && <Table.Th>Site</Table.Th>}
              <Table.Th>↓ to clients</Table.Th>
              <Table.Th>↑ from clients</Table.Th>
              <Table.Th>Flows</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {data.talkers.map((t) => (
              <Table.Tr key={t.key}>
                <Table.Td className="mono">
                  <Anchor component={Link} to={`/flows?tab=closed&${by}=${encodeURIComponent(t.key)}`}>
                    {t.key}
                  </Anchor>
                </Table.Td>
                {by === 'client' && <Table.Td>{t.site ?? '—'}</Table.Td>}
                <Table.Td>{formatBytes(t.bytes_down)}</Table.Td>
                <Table.Td>{formatBytes(t.bytes_up)}</Table.Td>
                <Table.Td>{t.flows.toLocaleString()}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
    </Paper>
  );
}

/** A hub serving many terminals: every remote site's traffic now, over time, and who talked most. */
export default function SitesPage() {
  const [range] = useRange();
  const sites = useQuery({ queryKey: keys.sites, queryFn: endpoints.sites, refetchInterval: 2000 });
  const health = useQuery({ queryKey: keys.health, queryFn: endpoints.health, refetchInterval: 5000 });
  const savings = savingsWords(gatewayHealth(health.data)?.role);
  const start = () => Math.floor(Date.now() / 1000) - range.seconds;
  const bySite = useQuery({
    queryKey: keys.topTalkers({ by: 'site', range: range.value }),
    queryFn: () => endpoints.topTalkers('site', start()),
    refetchInterval: range.refreshMs,
  });
  const byClient = useQuery({
    queryKey: keys.topTalkers({ by: 'client', range: range.value }),
    queryFn: () => endpoints.topTalkers('client', start()),
    refetchInterval: range.refreshMs,
  });
  return (
    <>
      <PageHeader
        title="Sites"
        description="Traffic per remote site (sites and their client prefixes are set in the configuration; clients no site covers count as other)."
        actions={<RangePicker />}
      />
      <Stack>
        <QueryView query={sites} isEmpty={(d) => d.sites.length === 0} empty={<EmptyState title="No sites configured" />}>
          {(d) => (
            <ScrollTable
              minWidth={860}
              columns={['Site', 'Prefixes', 'Live flows', '↓ to the site', '↑ from the site', 'Satellite RTT', 'Retransmissions', savings.title]}
              striped
              aria-label="Sites now"
              fz="sm"
            >
              {d.sites.map((s) => (
                <Table.Tr key={s.site}>
                  <Table.Td fw={600}>
                    <Anchor component={Link} to={`/flows?tab=closed&site=${encodeURIComponent(s.site)}`}>
                      {s.site}
                    </Anchor>
                  </Table.Td>
                  <Table.Td className="mono">
                    {s.prefixes.length ? s.prefixes.join(', ') : <Text span c="dimmed">{s.site === 'other' ? 'no site' : '—'}</Text>}
                  </Table.Td>
                  <Table.Td>{s.flows.toLocaleString()}</Table.Td>
                  <Table.Td>{formatBps(s.down_bps)}</Table.Td>
                  <Table.Td>{formatBps(s.up_bps)}</Table.Td>
                  <Table.Td>{s.rtt_ms == null ? '—' : `${s.rtt_ms.toFixed(0)} ms`}</Table.Td>
                  <Table.Td>{`${s.retrans_ps.toFixed(1)} /s`}</Table.Td>
                  <Table.Td>{formatBps(s.cache_saved_bps)}</Table.Td>
                </Table.Tr>
              ))}
            </ScrollTable>
          )}
        </QueryView>
        <Group gap="xs">
          <Badge variant="light">rates: the last second, from what crossed the satellite</Badge>
        </Group>
        <SimpleGrid cols={{ base: 1, md: 2 }}>
          <SiteChart title="Throughput to the site" metric="site_down_bps" range={range} format={formatBps} />
          <SiteChart title="Throughput from the site" metric="site_up_bps" range={range} format={formatBps} />
          <SiteChart title="Live flows" metric="site_flows" range={range} format={(v) => v.toFixed(0)} integer />
          <SiteChart title="Satellite RTT" metric="site_rtt_ms" range={range} format={(v) => `${v.toFixed(0)} ms`} />
          <SiteChart title="Retransmitted segments" metric="site_retrans_ps" range={range} format={(v) => `${v.toFixed(1)} /s`} />
          <SiteChart title={`${savings.title} (served from the cache)`} metric="site_saved_bps" range={range} format={formatBps} />
        </SimpleGrid>
        <SimpleGrid cols={{ base: 1, md: 2 }}>
          <QueryView query={bySite}>{(d) => <TalkersTable title={`Top sites, ${describeRange(range)}`} data={d} by="site" />}</QueryView>
          <QueryView query={byClient}>{(d) => <TalkersTable title={`Top client addresses, ${describeRange(range)}`} data={d} by="client" />}</QueryView>
        </SimpleGrid>
      </Stack>
    </>
  );
}
