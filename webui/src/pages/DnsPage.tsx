import { Alert, Button, Group, Paper, SimpleGrid, Stack, Table, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { endpoints, type ProbeResult } from '../api/endpoints';
import { ApiError, errorMessage } from '../api/errors';
import { keys } from '../api/keys';
import { LazyTimeSeriesChart } from '../charts/LazyChart';
import { KeyValueTable } from '../components/KeyValueTable';
import { PageHeader } from '../components/PageHeader';
import { useCan } from '../auth/roles';
import { StatCard } from '../components/StatCard';
import { QueryView } from '../components/StateViews';
import { dnsView, formatWait } from '../lib/dns';
import { formatBytes, formatPercent } from '../lib/format';
import { seriesToRows } from '../lib/series';

const WINDOW_S = 15 * 60;
const NAME_RE = /^[A-Za-z0-9_-]{1,63}(\.[A-Za-z0-9_-]{1,63})*\.?$/;

function ProbeTable({ probe }: { probe: ProbeResult[] }) {
  if (probe.length === 0) return <Text size="sm" c="dimmed">No probe yet.</Text>;
  return (
    <Table aria-label="Upstream probe" verticalSpacing={4} fz="sm">
      <Table.Thead>
        <Table.Tr>
          <Table.Th>upstream</Table.Th>
          <Table.Th>answers</Table.Th>
          <Table.Th>round trip</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {probe.map((p) => (
          <Table.Tr key={p.upstream}>
            <Table.Td className="mono">{p.upstream}</Table.Td>
            <Table.Td c={p.ok ? undefined : 'red'}>{p.ok ? 'yes' : (p.error ?? 'no')}</Table.Td>
            <Table.Td>{p.rtt_ms == null ? '—' : `${p.rtt_ms.toFixed(0)} ms`}</Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}

export default function DnsPage() {
  const canWrite = useCan()('operator');
  const queryClient = useQueryClient();
  const stats = useQuery({ queryKey: keys.dns, queryFn: endpoints.dnsStats, refetchInterval: 5000 });
  const running = useQuery({ queryKey: keys.running, queryFn: endpoints.running });
  const series = useQuery({
    queryKey: keys.series({ metric: 'dns_hit_ratio', window: WINDOW_S }),
    queryFn: () => endpoints.series('dns_hit_ratio', Math.floor(Date.now() / 1000) - WINDOW_S),
    refetchInterval: 5000,
  });
  const [name, setName] = useState('');
  const [nameError, setNameError] = useState<string | undefined>();
  const flush = useMutation({
    mutationFn: endpoints.dnsFlush,
    onSuccess: () => queryClient.invalidateQueries({ queryKey: keys.dns }),
    onError: (e) => setNameError(e instanceof ApiError ? (e.fieldErrors.name ?? undefined) : undefined),
  });
  // What the gateway runs, not the desired version: the two differ until it is applied.
  const dnsCfg = running.data?.config?.dns;

  const submitName = (e: FormEvent) => {
    e.preventDefault();
    if (!NAME_RE.test(name)) {
      setNameError('A domain name, e.g. www.example.com');
      return;
    }
    setNameError(undefined);
    flush.mutate({ name });
  };

  return (
    <>
      <PageHeader title="DNS" description="The resolver at the gateway: a name it has answered once never waits for the satellite again." />
      <Stack>
        {dnsCfg && !dnsCfg.enabled && (
          <Alert color="gray" title="Resolver disabled">
            The gateway runs with dns off: lookups from the served subnets go to the resolvers they were sent to. Counters below are the gateway&apos;s last values.
          </Alert>
        )}
        <QueryView query={stats}>
          {(s) => {
            const v = dnsView(s);
            return (
              <Stack>
                {!v.upstreamHealthy && (
                  <Alert color="orange" title="No upstream resolver answers" role="alert">
                    Cached names are still answered (stale ones too); new names fail until an upstream answers. Meanwhile the HTTP cache steps aside and port 80 is only accelerated.
                  </Alert>
                )}
                <SimpleGrid cols={{ base: 2, sm: 4 }}>
                  <StatCard label="Queries" value={v.queries.toLocaleString()} hint={`${v.hits.toLocaleString()} answered here`} />
                  <StatCard label="Hit ratio" value={formatPercent(v.hitRatio)} hint="answered without the upstream" />
                  <StatCard label="Satellite time saved" value={formatWait(v.savedSeconds)} hint="hits × mean upstream time" />
                  <StatCard label="Mean upstream time" value={v.meanUpstreamMs == null ? '—' : formatWait(v.meanUpstreamMs / 1000)} hint="what a miss waits" />
                  <StatCard label="Stale answers" value={v.staleAnswers.toLocaleString()} hint="expired names served at once (RFC 8767)" />
                  <StatCard label="Prefetches" value={v.prefetches.toLocaleString()} hint="popular names refreshed before expiry" />
                  <StatCard label="Cache memory" value={formatBytes(v.memoryUsed)} hint={v.memoryCapacity ? `of ${formatBytes(v.memoryCapacity)}` : undefined} />
                  <StatCard label="Resolver" value={v.running ? 'running' : v.enabled ? 'down' : 'off'} color={v.enabled && !v.running ? 'red' : undefined} hint={v.upstreamHealthy ? 'upstream answers' : 'upstream unreachable'} />
                </SimpleGrid>
                <Paper withBorder p="md" component="section" aria-label="Upstream resolvers">
                  <Title order={3} size="h5" mb="xs">
                    Upstream resolvers
                  </Title>
                  <ProbeTable probe={v.probe} />
                </Paper>
                <Paper withBorder p="sm" component="section" aria-label="DNS hit ratio">
                  <Title order={3} size="h5" mb="xs">
                    Hit ratio
                  </Title>
                  <LazyTimeSeriesChart
                    label="DNS hit ratio, last 15 minutes"
                    data={seriesToRows(series.data, 100)}
                    format={(x) => `${x.toFixed(0)} %`}
                    series={[{ key: 'value', label: 'hit ratio', color: 'var(--mantine-color-teal-6)' }]}
                  />
                </Paper>
                <Paper withBorder p="md">
                  <Title order={3} size="h5" mb="xs">
                    All counters
                  </Title>
                  <KeyValueTable data={s} label="DNS counters" />
                </Paper>
              </Stack>
            );
          }}
        </QueryView>
        {canWrite && (
        <Paper withBorder p="md" component="section" aria-labelledby="flush-title">
          <Title order={3} size="h4" id="flush-title" mb="sm">
            Flush
          </Title>
          <form onSubmit={submitName} noValidate>
            <Group align="flex-start" wrap="wrap">
              <TextInput label="Name" placeholder="www.example.com" value={name} onChange={(e) => setName(e.currentTarget.value)} error={nameError} style={{ flex: '1 1 320px' }} />
              <Button type="submit" mt={25} loading={flush.isPending && flush.variables && 'name' in flush.variables}>
                Flush name
              </Button>
              <Button
                color="red"
                variant="light"
                mt={25}
                loading={flush.isPending && flush.variables && 'all' in flush.variables}
                onClick={() => {
                  if (window.confirm('Flush every cached name? The next lookups cross the satellite link again.')) flush.mutate({ all: true });
                }}
              >
                Flush everything
              </Button>
            </Group>
          </form>
          {flush.isSuccess && (
            <Alert color="green" mt="sm" role="status">
              Flushed.
            </Alert>
          )}
          {flush.error && !nameError && (
            <Alert color="red" mt="sm" role="alert">
              {errorMessage(flush.error)}
            </Alert>
          )}
        </Paper>
        )}
        <Text size="sm" c="dimmed">
          Browsers and apps that use DNS over HTTPS or DNS over TLS send their lookups inside encrypted connections to their own resolver: the gateway cannot answer those, and each of their lookups crosses the satellite (docs/dns.md).
        </Text>
      </Stack>
    </>
  );
}
