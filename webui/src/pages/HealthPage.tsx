import { Alert, Badge, Box, Group, List, Paper, SimpleGrid, Stack, Table, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { endpoints } from '../api/endpoints';
import { useAuth } from '../auth/useAuth';
import { keys } from '../api/keys';
import { KeyValueTable } from '../components/KeyValueTable';
import { PageHeader } from '../components/PageHeader';
import { StatCard } from '../components/StatCard';
import { TlsCertificateCard } from '../components/TlsCertificateCard';
import { QueryView } from '../components/StateViews';
import { formatBps, formatBytes, formatDuration, formatPercent } from '../lib/format';
import { hostView, type Host } from '../lib/host';
import { ScrollTable } from '../components/ScrollTable';
import type { GatewayHealth } from '../api/endpoints';
import { gatewayHealth } from '../lib/health';

type ServiceState = GatewayHealth['services']['squid'];

function serviceText(s: ServiceState | undefined): { value: string; hint: string; color?: string } {
  if (!s) return { value: '—', hint: '' };
  if (!s.enabled) return { value: 'off', hint: 'not enabled in the config' };
  if (s.serving) return { value: 'serving', hint: 'its traffic goes to it' };
  return { value: 'not serving', hint: s.problem ?? '', color: 'orange' };
}

/** CPU, memory, disks and interfaces of the gateway's box, with rates between the last two readings, timed by
 * the gateway's own clock (its uptime), not by when the answers arrived here. */
function HostSection({ host, at }: { host: Host; at: number }) {
  const [readings, setReadings] = useState<{ prev: { at: number; host: Host } | null; last: { at: number; host: Host } }>({ prev: null, last: { at, host } });
  if (readings.last.host !== host && at > readings.last.at) setReadings({ prev: readings.last, last: { at, host } });
  const seconds = readings.prev ? readings.last.at - readings.prev.at : 0;
  const v = hostView(readings.last.host, readings.prev?.host ?? null, seconds);
  return (
    <Stack>
      <SimpleGrid cols={{ base: 2, sm: 4 }}>
        <StatCard label="CPU" value={formatPercent(v.cpuBusy, 0)} hint={`${v.cpus} CPUs; load ${v.load.map((l) => l.toFixed(2)).join(', ')}`} />
        <StatCard
          label="Memory in use"
          value={v.memoryTotal ? formatPercent(v.memoryUsed / v.memoryTotal, 0) : '—'}
          hint={`${formatBytes(v.memoryUsed)} of ${formatBytes(v.memoryTotal)}`}
          color={v.memoryTotal && v.memoryUsed / v.memoryTotal > 0.9 ? 'orange' : undefined}
        />
        {v.disks.map((d) => (
          <StatCard
            key={d.path}
            label={`Disk ${d.path}`}
            value={d.total ? formatPercent(d.used / d.total, 0) : '—'}
            hint={`${formatBytes(d.used)} of ${formatBytes(d.total)} used`}
            color={d.total && d.used / d.total > 0.9 ? 'orange' : undefined}
          />
        ))}
      </SimpleGrid>
      <Paper withBorder p="md">
        <Title order={3} size="h5" mb="xs">
          Interfaces
        </Title>
        <ScrollTable minWidth={560} columns={['Interface', 'Receiving', 'Sending', 'Errors', 'Dropped']} aria-label="Interfaces" striped>
          {v.interfaces.map((i) => (
            <Table.Tr key={i.name}>
              <Table.Td fw={600}>{i.name}</Table.Td>
              <Table.Td>{i.rxBps == null ? '—' : formatBps(i.rxBps)}</Table.Td>
              <Table.Td>{i.txBps == null ? '—' : formatBps(i.txBps)}</Table.Td>
              <Table.Td c={i.errors ? 'orange' : undefined}>{i.errors.toLocaleString()}</Table.Td>
              <Table.Td c={i.dropped ? 'orange' : undefined}>{i.dropped.toLocaleString()}</Table.Td>
            </Table.Tr>
          ))}
        </ScrollTable>
      </Paper>
    </Stack>
  );
}

export default function HealthPage() {
  const health = useQuery({ queryKey: keys.health, queryFn: endpoints.health, refetchInterval: 5000 });
  const versions = useQuery({ queryKey: ['system', 'versions'], queryFn: endpoints.systemVersions, retry: false });
  const { user } = useAuth();
  return (
    <>
      <PageHeader title="System health" description="The API, its database and collector, and the gateway daemon behind it." />
      <QueryView query={health}>
        {(h) => {
          const gw = gatewayHealth(h);
          const api = h.api as { status?: string; version?: string; uptime_s?: number; collector?: { ticks?: number; last_error?: string | null } };
          return (
            <Stack>
              <Group>
                <Badge size="lg" color={h.status === 'ok' ? 'green' : 'orange'}>
                  overall: {h.status}
                </Badge>
              </Group>
              {h.problems.length > 0 && (
                <Alert color="orange" title="Problems" role="alert">
                  <List size="sm">
                    {h.problems.map((p) => (
                      <List.Item key={p}>{p}</List.Item>
                    ))}
                  </List>
                </Alert>
              )}
              <SimpleGrid cols={{ base: 2, sm: 4 }}>
                <StatCard label="API" value={api.status ?? '—'} hint={`version ${api.version ?? '?'}, up ${formatDuration(api.uptime_s)}`} />
                <StatCard label="Collector" value={api.collector ? `${api.collector.ticks ?? 0} ticks` : 'off'} hint={api.collector?.last_error ?? 'no error'} color={api.collector?.last_error ? 'orange' : undefined} />
                <StatCard label="Gateway" value={h.gateway_reachable ? gw?.status ?? 'ok' : 'unreachable'} color={h.gateway_reachable ? undefined : 'red'} hint={gw ? `${gw.role ?? ''} ${gw.version ?? ''}, up ${formatDuration(gw.uptime_s)}` : undefined} />
                <StatCard
                  label="Splitting"
                  value={gw ? (gw.fail_open ? 'failed open' : 'on') : '—'}
                  color={gw?.fail_open ? 'red' : undefined}
                  hint={gw ? (gw.fail_open ? 'new connections pass unsplit (no worker listening, or max_flows reached)' : 'new connections are split') : undefined}
                />
                <StatCard label="Squid" {...serviceText(gw?.services?.squid)} />
                <StatCard label="Resolver" {...serviceText(gw?.services?.resolver)} />
              </SimpleGrid>
              {gw?.host && <HostSection host={gw.host} at={gw.uptime_s} />}
              <SimpleGrid cols={{ base: 1, md: 2 }}>
                {gw?.hybla && (
                  <Paper withBorder p="md">
                    <Title order={3} size="h5" mb="xs">
                      Hybla
                    </Title>
                    <KeyValueTable data={gw.hybla as unknown as Record<string, unknown>} label="Hybla status" />
                  </Paper>
                )}
                <Paper withBorder p="md">
                  <Title order={3} size="h5" mb="xs">
                    Versions
                  </Title>
                  {versions.data ? <KeyValueTable data={versions.data} label="Component versions" /> : null}
                </Paper>
              </SimpleGrid>
            </Stack>
          );
        }}
      </QueryView>
      <Box mt="md">
        <TlsCertificateCard canUpload={user?.role === 'admin'} />
      </Box>
    </>
  );
}
