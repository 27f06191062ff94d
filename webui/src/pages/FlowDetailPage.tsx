import { Alert, Anchor, Badge, Group, Paper, SimpleGrid, Stack, Table, Text, Title } from '@mantine/core';
import { Link, useParams } from 'react-router-dom';
import { LazyTimeSeriesChart } from '../charts/LazyChart';
import { PageHeader } from '../components/PageHeader';
import { LoadingState } from '../components/StateViews';
import { formatBps, formatBytes, formatDuration, formatMs, formatTime } from '../lib/format';
import type { TcpInfo } from '../api/endpoints';
import { legsOf, PATH_LABEL, pathOf, RELAY_LABEL, satelliteBytes } from '../lib/flows';
import { useLiveFlows } from '../live/LiveFlowsContext';
import { useFlowSamples } from '../live/useFlowSamples';

const SAT = 'var(--mantine-color-indigo-6)';
const TER = 'var(--mantine-color-teal-6)';

function LegCard({ title, leg }: { title: string; leg: TcpInfo | null }) {
  return (
    <Paper withBorder p="md">
      <Title order={3} size="h5" mb="xs">
        {title}
      </Title>
      {!leg ? (
        <Text c="dimmed" size="sm">No TCP_INFO for this leg.</Text>
      ) : (
        <Table verticalSpacing={2} fz="sm">
          <Table.Tbody>
            <Table.Tr><Table.Th>Congestion control</Table.Th><Table.Td>{leg.cc || '—'}</Table.Td></Table.Tr>
            <Table.Tr>
              <Table.Th>Delivered / received</Table.Th>
              <Table.Td>
                {formatBps(leg.tx_bps)} / {formatBps(leg.rx_bps)} (acknowledged by its peer / arrived, last second)
              </Table.Td>
            </Table.Tr>
            <Table.Tr><Table.Th>Bytes delivered / received</Table.Th><Table.Td>{formatBytes(leg.bytes_acked)} / {formatBytes(leg.bytes_received)}</Table.Td></Table.Tr>
            <Table.Tr><Table.Th>Smoothed RTT</Table.Th><Table.Td>{formatMs(leg.srtt_us)} (min {formatMs(leg.min_rtt_us)}, var {formatMs(leg.rttvar_us)})</Table.Td></Table.Tr>
            <Table.Tr><Table.Th>cwnd / ssthresh</Table.Th><Table.Td>{leg.cwnd} / {leg.ssthresh} segments (MSS {leg.mss})</Table.Td></Table.Tr>
            <Table.Tr><Table.Th>Delivery / pacing rate</Table.Th><Table.Td>{formatBps(leg.delivery_rate_bps)} / {formatBps(leg.pacing_rate_bps)}</Table.Td></Table.Tr>
            <Table.Tr><Table.Th>Retransmits / lost</Table.Th><Table.Td>{leg.retrans_total} / {leg.lost}</Table.Td></Table.Tr>
            <Table.Tr><Table.Th>Not yet sent</Table.Th><Table.Td>{formatBytes(leg.notsent_bytes)}</Table.Td></Table.Tr>
          </Table.Tbody>
        </Table>
      )}
    </Paper>
  );
}

export default function FlowDetailPage() {
  const { flowId } = useParams();
  const id = Number(flowId);
  const live = useLiveFlows();
  const flow = live.byId.get(id);
  const samples = useFlowSamples(flow, live.now);

  if (!flow) {
    return (
      <>
        <PageHeader title={`Flow ${flowId}`} />
        {live.updates === 0 ? (
          <LoadingState label="Waiting for the live flow stream…" />
        ) : (
          <Alert color="gray" title="This flow is not live">
            It ended or never existed. Closed flows are kept in the flow history. <Anchor component={Link} to="/flows">Back to flows</Anchor>
          </Alert>
        )}
      </>
    );
  }  const crossed = satelliteBytes(flow);

  const { satellite, terrestrial } = legsOf(flow);
  const satSide = flow.legs?.satellite === 'client' ? 'client' : 'server';
  return (
    <>
      <PageHeader
        title={`Flow ${flow.id}`}
        description={`${flow.client} → ${flow.server}`}
        actions={<Anchor component={Link} to="/flows">All flows</Anchor>}
      />
      <Stack>
        <Group gap="xs">
          <Badge variant="light">{flow.class}</Badge>
          <Badge variant="light" color="grape">{flow.action}</Badge>
          <Badge variant="outline">{flow.state}</Badge>
          {flow.relay && <Badge variant="light" color={flow.relay === 'squid' ? 'teal' : 'gray'}>{RELAY_LABEL[flow.relay] ?? flow.relay}</Badge>}
          {flow.site && <Badge variant="light" color="orange">site {flow.site}</Badge>}
          {flow.dscp != null && <Badge variant="outline" title="The DSCP the re-originated leg carries">DSCP {flow.dscp}</Badge>}
          <Badge
            variant="outline"
            color={pathOf(flow) === 'peer' ? 'violet' : 'gray'}
            title={
              pathOf(flow) === 'peer'
                ? 'Carried across the satellite on a warm, authenticated connection between the two gateways: no handshake before the first bytes'
                : 'Carried across the satellite on its own connection'
            }
          >
            {PATH_LABEL[pathOf(flow)] ?? pathOf(flow)}
          </Badge>
          <Text size="sm" c="dimmed">
            started {formatTime(flow.started_at)} · up {formatDuration((live.now ?? Date.now() / 1000) - flow.started_at)} · over the satellite ↓ {formatBytes(crossed?.down ?? flow.bytes_down)} ({formatBps(flow.rate_down_bps)}) · ↑ {formatBytes(crossed?.up ?? flow.bytes_up)} ({formatBps(flow.rate_up_bps)})
            {crossed && crossed.queuedDown > 0 ? ` · ${formatBytes(crossed.queuedDown)} still queued for the satellite (the server handed over ${formatBytes(flow.bytes_down)})` : ''}
          </Text>
        </Group>
        {flow.cache && (
          <Paper withBorder p="md" component="section" aria-label="Cache requests">
            <Title order={3} size="h5" mb="xs">
              Cache requests on this connection
            </Title>
            {flow.cache.requests === 0 ? (
              <Text size="sm">No request has finished yet (Squid logs each one when it ends).</Text>
            ) : (
              <Text size="sm">
                {flow.cache.requests} request(s): {flow.cache.hits} from the cache, {flow.cache.misses} from the origin · last {flow.cache.result || '—'}{' '}
                for {flow.cache.host || '—'} · {formatBytes(flow.cache.bytes_to_client)} to the client, {formatBytes(flow.cache.bytes_from_origin)} fetched
              </Text>
            )}
          </Paper>
        )}
        <SimpleGrid cols={{ base: 1, md: 2 }}>
          <LegCard title={`Satellite leg (${satSide} side)`} leg={satellite} />
          <LegCard title={`Terrestrial leg (${satSide === 'client' ? 'server' : 'client'} side)`} leg={terrestrial} />
        </SimpleGrid>
        <Text size="sm" c="dimmed">{samples.length} live samples since this page opened.</Text>
        <SimpleGrid cols={{ base: 1, lg: 3 }}>
          <Paper withBorder p="sm">
            <Title order={3} size="h5" mb="xs">RTT</Title>
            <LazyTimeSeriesChart label="Smoothed RTT of both legs over time" data={samples} format={(v) => `${v.toFixed(0)} ms`} series={[{ key: 'sat_rtt_ms', label: 'satellite', color: SAT }, { key: 'ter_rtt_ms', label: 'terrestrial', color: TER }]} />
          </Paper>
          <Paper withBorder p="sm">
            <Title order={3} size="h5" mb="xs">Congestion window</Title>
            <LazyTimeSeriesChart label="Congestion window of both legs over time" data={samples} format={(v) => `${v.toFixed(0)}`} series={[{ key: 'sat_cwnd', label: 'satellite', color: SAT }, { key: 'ter_cwnd', label: 'terrestrial', color: TER }]} />
          </Paper>
          <Paper withBorder p="sm">
            <Title order={3} size="h5" mb="xs">Delivery rate</Title>
            <LazyTimeSeriesChart label="Delivery rate of both legs over time" data={samples} format={formatBps} series={[{ key: 'sat_rate_bps', label: 'satellite', color: SAT }, { key: 'ter_rate_bps', label: 'terrestrial', color: TER }]} />
          </Paper>
        </SimpleGrid>
      </Stack>
    </>
  );
}
