import { Alert, Badge, Group, Paper, SimpleGrid, Stack, Text, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useMemo, type ReactNode } from 'react';
import { endpoints, type Metric } from '../api/endpoints';
import { keys } from '../api/keys';
import { LazyTimeSeriesChart } from '../charts/LazyChart';
import { PageHeader } from '../components/PageHeader';
import { StatCard } from '../components/StatCard';
import { ErrorState } from '../components/StateViews';
import { dnsView, formatWait } from '../lib/dns';
import { formatBps, formatBytes, formatMs, formatPercent } from '../lib/format';
import { legsOf } from '../lib/flows';
import { alertsFrom, gatewayHealth } from '../lib/health';
import { seriesToRows } from '../lib/series';
import { useLiveFlows } from '../live/LiveFlowsContext';

const WINDOW_S = 15 * 60;
const COLORS = { accelerate: 'var(--mantine-color-indigo-6)', cache: 'var(--mantine-color-teal-6)', bypass: 'var(--mantine-color-gray-6)' };

function useSeries(metric: Metric) {
  return useQuery({
    queryKey: keys.series({ metric, window: WINDOW_S }),
    queryFn: () => endpoints.series(metric, Math.floor(Date.now() / 1000) - WINDOW_S),
    refetchInterval: 5000,
  });
}

function mean(values: number[]): number | null {
  return values.length ? values.reduce((a, b) => a + b, 0) / values.length : null;
}

function ChartCard({ title, children }: { title: string; children: ReactNode }) {
  return (
    <Paper withBorder p="sm" component="section" aria-label={title}>
      <Title order={3} size="h5" mb="xs">
        {title}
      </Title>
      {children}
    </Paper>
  );
}

export default function OverviewPage() {
  const live = useLiveFlows();
  const health = useQuery({ queryKey: keys.health, queryFn: endpoints.health, refetchInterval: 5000 });
  const cache = useQuery({ queryKey: keys.cache, queryFn: endpoints.cacheStats, refetchInterval: 5000, retry: false });
  const dns = useQuery({ queryKey: keys.dns, queryFn: endpoints.dnsStats, refetchInterval: 5000, retry: false });
  const desired = useQuery({ queryKey: keys.desired, queryFn: endpoints.desiredConfig });
  const profiles = useQuery({ queryKey: keys.bodProfiles, queryFn: endpoints.bodProfiles });
  const link = useSeries('link_bps');
  const byAction = useSeries('action_bps');
  const rtt = useSeries('leg_rtt_ms');
  const hit = useSeries('cache_hit_ratio');

  // Live numbers come from the SSE flow table, so they move every second without polling.
  const now = useMemo(() => {
    let down = 0;
    let up = 0;
    const sat: number[] = [];
    const ter: number[] = [];
    for (const f of live.flows) {
      down += f.rate_down_bps;
      up += f.rate_up_bps;
      const legs = legsOf(f);
      if (legs.satellite?.srtt_us) sat.push(legs.satellite.srtt_us);
      if (legs.terrestrial?.srtt_us) ter.push(legs.terrestrial.srtt_us);
    }
    return { down, up, sat: mean(sat), ter: mean(ter) };
  }, [live.flows]);

  const profile = profiles.data?.[0];
  const forwardCap = profile?.inputs.forward_rate_bps ?? null;
  const returnCap = profile ? profile.inputs.return_cra_bps + profile.inputs.return_rbdc_max_bps : null;
  const role = (desired.data?.config.role as string | undefined) ?? 'hub';
  // Forward = hub → terminal. On a hub, server→client ("down") flows forward; on a terminal it arrives from the satellite too.
  const forwardNow = now.down;
  const returnNow = now.up;
  const stats = cache.data;
  const requests = Number(stats?.requests ?? 0);
  const hits = Number(stats?.hits ?? 0);
  const hitRatio = requests > 0 ? hits / requests : null;
  const bytesSaved = typeof stats?.bytes_hit === 'number' ? stats.bytes_hit : typeof stats?.bytes_saved === 'number' ? stats.bytes_saved : null;
  const cacheEnabled = Boolean((desired.data?.config.cache as { enabled?: boolean } | undefined)?.enabled);
  const alerts = alertsFrom(health.data, stats, cacheEnabled);
  const gw = gatewayHealth(health.data);
  const resolver = dnsView(dns.data);
  const hybla = gw?.hybla;

  const linkRows = useMemo(
    () =>
      seriesToRows(link.data).map((r) => ({
        t: r.t,
        forward: forwardCap ? ((r.down ?? 0) / forwardCap) * 100 : null,
        return: returnCap ? ((r.up ?? 0) / returnCap) * 100 : null,
        down: r.down ?? null,
        up: r.up ?? null,
      })),
    [link.data, forwardCap, returnCap],
  );

  return (
    <>
      <PageHeader title="Overview" description={`Satellite link, acceleration and cache at a glance (${role}).`} />
      <Stack>
        {health.error && <ErrorState error={health.error} title="Health unavailable" onRetry={() => void health.refetch()} />}
        {alerts.length > 0 && (
          <Stack gap="xs" aria-label="Alerts">
            {alerts.map((a) => (
              <Alert key={a.id} color={a.level} title={a.title} role="alert" py="xs">
                {a.text}
              </Alert>
            ))}
          </Stack>
        )}
        <SimpleGrid cols={{ base: 2, sm: 3, lg: 6 }}>
          <StatCard label="Active flows" value={live.flows.length.toLocaleString()} hint={live.status === 'open' ? 'live' : live.status} />
          <StatCard
            label="Forward link"
            value={forwardCap ? formatPercent(forwardNow / forwardCap, 0) : formatBps(forwardNow)}
            hint={forwardCap ? `${formatBps(forwardNow)} of ${formatBps(forwardCap)}` : 'hub → terminal; set a BoD profile for utilization'}
          />
          <StatCard
            label="Return link"
            value={returnCap ? formatPercent(returnNow / returnCap, 0) : formatBps(returnNow)}
            hint={returnCap ? `${formatBps(returnNow)} of ${formatBps(returnCap)}` : 'terminal → hub'}
          />
          <StatCard label="Cache hit ratio" value={formatPercent(hitRatio)} hint={`${hits.toLocaleString()} of ${requests.toLocaleString()} requests`} />
          <StatCard label="Bytes saved" value={formatBytes(bytesSaved)} hint="served from the cache" />
          <StatCard
            label="Hybla"
            value={hybla ? (hybla.loaded ? hybla.implementation : 'not loaded') : '—'}
            color={hybla && !hybla.loaded ? 'orange' : undefined}
            hint={hybla ? `RTT0 ${hybla.rtt0_ms} ms, base RTT ${hybla.base_rtt_ms ? `${hybla.base_rtt_ms} ms` : 'measured'}` : undefined}
          />
        </SimpleGrid>
        <SimpleGrid cols={{ base: 2, sm: 3, lg: 6 }}>
          <StatCard label="DNS hit ratio" value={formatPercent(resolver.hitRatio)} hint={resolver.enabled ? `${resolver.hits.toLocaleString()} of ${resolver.queries.toLocaleString()} lookups` : 'resolver off'} />
          <StatCard label="DNS time saved" value={formatWait(resolver.savedSeconds)} hint="lookups that did not cross the satellite" />
          <StatCard label="Satellite leg RTT" value={formatMs(now.sat)} hint="mean over live flows" />
          <StatCard label="Terrestrial leg RTT" value={formatMs(now.ter)} hint="mean over live flows" />
          <StatCard label="Gateway" value={health.data ? (health.data.gateway_reachable ? gw?.status ?? 'ok' : 'down') : '—'} color={health.data && !health.data.gateway_reachable ? 'red' : undefined} hint={gw?.version ? `version ${gw.version}` : undefined} />
          <StatCard label="Config revision" value={gw?.config_revision ?? '—'} hint="running on the gateway" />
        </SimpleGrid>
        <SimpleGrid cols={{ base: 1, md: 2 }}>
          <ChartCard title={forwardCap ? 'Satellite link utilization' : 'Satellite link throughput'}>
            {forwardCap ? (
              <LazyTimeSeriesChart
                label="Forward and return link utilization, last 15 minutes"
                data={linkRows}
                format={(v) => `${v.toFixed(0)} %`}
                series={[{ key: 'forward', label: 'forward', color: COLORS.accelerate }, { key: 'return', label: 'return', color: COLORS.cache }]}
              />
            ) : (
              <LazyTimeSeriesChart
                label="Forward and return throughput, last 15 minutes"
                data={linkRows}
                format={formatBps}
                series={[{ key: 'down', label: 'forward (down)', color: COLORS.accelerate }, { key: 'up', label: 'return (up)', color: COLORS.cache }]}
              />
            )}
          </ChartCard>
          <ChartCard title="Accelerated, cached and bypassed throughput">
            <LazyTimeSeriesChart
              label="Throughput by action, last 15 minutes"
              data={seriesToRows(byAction.data)}
              format={formatBps}
              series={[
                { key: 'accelerate', label: 'accelerated', color: COLORS.accelerate },
                { key: 'cache', label: 'cached', color: COLORS.cache },
                { key: 'bypass', label: 'bypassed', color: COLORS.bypass },
              ]}
            />
          </ChartCard>
          <ChartCard title="Per-leg RTT">
            <LazyTimeSeriesChart
              label="Mean smoothed RTT of the satellite and terrestrial legs, last 15 minutes"
              data={seriesToRows(rtt.data)}
              format={(v) => `${v.toFixed(0)} ms`}
              series={[{ key: 'satellite', label: 'satellite', color: COLORS.accelerate }, { key: 'terrestrial', label: 'terrestrial', color: COLORS.cache }]}
            />
          </ChartCard>
          <ChartCard title="Cache hit ratio">
            <LazyTimeSeriesChart
              label="Cache hit ratio, last 15 minutes"
              data={seriesToRows(hit.data, 100)}
              format={(v) => `${v.toFixed(0)} %`}
              series={[{ key: 'value', label: 'hit ratio', color: COLORS.cache }]}
            />
          </ChartCard>
        </SimpleGrid>
        {(link.error || byAction.error) && <Text c="red" size="sm">Time series unavailable: {String((link.error ?? byAction.error) as Error)}</Text>}
        <Group gap="xs">
          <Badge variant="light">{live.updates} live updates</Badge>
          {live.reconnects > 0 && <Badge color="orange" variant="light">{live.reconnects} stream reconnects</Badge>}
        </Group>
      </Stack>
    </>
  );
}
