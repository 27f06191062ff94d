import { Alert, Badge, Group, Paper, SimpleGrid, Stack, Text, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useMemo, type ReactNode } from 'react';
import { endpoints, type Metric } from '../api/endpoints';
import { keys } from '../api/keys';
import { LazyTimeSeriesChart } from '../charts/LazyChart';
import { PageHeader } from '../components/PageHeader';
import { RangePicker, useRange } from '../components/RangePicker';
import { StatCard } from '../components/StatCard';
import { ErrorState } from '../components/StateViews';
import { cacheView, savingsWords } from '../lib/cache';
import type { GatewayConfig } from '../api/endpoints';
import { dnsView, formatWait } from '../lib/dns';
import { formatBps, formatBytes, formatMs, formatPercent } from '../lib/format';
import { legsOf } from '../lib/flows';
import { alertsFrom, gatewayHealth } from '../lib/health';
import { describeRange, type TimeRange } from '../lib/ranges';
import { latest, seriesToRows } from '../lib/series';
import { useLiveFlows } from '../live/LiveFlowsContext';

const COLORS = { accelerate: 'var(--mantine-color-indigo-6)', cache: 'var(--mantine-color-teal-6)', bypass: 'var(--mantine-color-gray-6)' };

function useSeries(metric: Metric, range: TimeRange) {
  return useQuery({
    queryKey: keys.series({ metric, range: range.value }),
    queryFn: () => endpoints.series(metric, Math.floor(Date.now() / 1000) - range.seconds),
    refetchInterval: range.refreshMs,
  });
}

/** The link's last few seconds, for the "now" figures: the satellite interface's counters (every frame that
 * crossed it), or the part the gateway intercepted (`link_split_bps`). */
function useLinkNow(metric: 'link_bps' | 'link_split_bps') {
  return useQuery({
    queryKey: keys.series({ metric, range: 'now' }),
    queryFn: () => endpoints.series(metric, Math.floor(Date.now() / 1000) - 10),
    refetchInterval: 2000,
  });
}

/** "split 40 % of it": the intercepted share of what crossed the link in one direction. */
function splitShare(total: number, split: number | null): string {
  if (split == null || total <= 0) return '';
  return `; ${formatPercent(Math.min(1, split / total), 0)} of it split or cached`;
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
  const [range] = useRange();
  const link = useSeries('link_bps', range);
  const byAction = useSeries('action_bps', range);
  const rtt = useSeries('leg_rtt_ms', range);
  const hit = useSeries('cache_hit_ratio', range);
  const linkNow = useLinkNow('link_bps');
  const splitNow = useLinkNow('link_split_bps');
  const running = useQuery({ queryKey: keys.running, queryFn: endpoints.running });

  // RTTs come from the SSE flow table, so they move every second without polling.
  const now = useMemo(() => {
    const sat: number[] = [];
    const ter: number[] = [];
    for (const f of live.flows) {
      const legs = legsOf(f);
      if (legs.satellite?.srtt_us) sat.push(legs.satellite.srtt_us);
      if (legs.terrestrial?.srtt_us) ter.push(legs.terrestrial.srtt_us);
    }
    return { sat: mean(sat), ter: mean(ter) };
  }, [live.flows]);

  // The link's rates: the config's (what the gateway exports for its alert), else the BoD profile's.
  const config = desired.data?.config as GatewayConfig | undefined;
  const profile = profiles.data?.[0];
  const forwardCap = config?.satellite?.forward_rate_bps || profile?.inputs.forward_rate_bps || null;
  const returnCap =
    config?.satellite?.return_rate_bps || (profile ? profile.inputs.return_cra_bps + profile.inputs.return_rbdc_max_bps : null) || null;
  const role = gatewayHealth(health.data)?.role ?? config?.role ?? 'hub';
  // Forward = hub → terminal: every frame the satellite interface carried, whatever the gateway did with it.
  const forwardNow = latest(linkNow.data, 'down') ?? 0;
  const returnNow = latest(linkNow.data, 'up') ?? 0;
  const forwardSplit = latest(splitNow.data, 'down');
  const returnSplit = latest(splitNow.data, 'up');
  const savings = savingsWords(role);
  // Hybla's base RTT is the config's (0 = measured per flow): what the gateway runs, not the desired version.
  const baseRtt = running.data?.config?.hybla?.base_rtt_ms;
  const stats = cache.data;
  const cacheNow = cacheView(stats);
  const alerts = alertsFrom(health.data, stats);
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
      <PageHeader title="Overview" description={`Satellite link, acceleration and cache at a glance (${role}).`} actions={<RangePicker />} />
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
            hint={`${forwardCap ? `${formatBps(forwardNow)} of ${formatBps(forwardCap)}` : 'hub → terminal; set a BoD profile for utilization'}${splitShare(forwardNow, forwardSplit)}`}
          />
          <StatCard
            label="Return link"
            value={returnCap ? formatPercent(returnNow / returnCap, 0) : formatBps(returnNow)}
            hint={`${returnCap ? `${formatBps(returnNow)} of ${formatBps(returnCap)}` : 'terminal → hub'}${splitShare(returnNow, returnSplit)}`}
          />
          <StatCard
            label="Cache hit ratio"
            value={cacheNow.enabled ? formatPercent(cacheNow.hitRatio) : 'off'}
            hint={`${cacheNow.hits.toLocaleString()} of ${(cacheNow.hits + cacheNow.misses).toLocaleString()} cacheable requests`}
          />
          <StatCard label={savings.title} value={formatBytes(cacheNow.savedBytes)} hint={savings.hint} />
          <StatCard
            label="Hybla"
            value={hybla ? (hybla.loaded ? hybla.implementation : 'not loaded') : '—'}
            color={hybla && !hybla.loaded ? 'orange' : undefined}
            hint={hybla ? `RTT0 ${hybla.rtt0_ms} ms, base RTT ${baseRtt == null ? '—' : baseRtt > 0 ? `${baseRtt} ms (set)` : 'measured per flow'}` : undefined}
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
                label={`Forward and return link utilization, ${describeRange(range)}`}
                data={linkRows}
                format={(v) => `${v.toFixed(0)} %`}
                series={[{ key: 'forward', label: 'forward', color: COLORS.accelerate }, { key: 'return', label: 'return', color: COLORS.cache }]}
              />
            ) : (
              <LazyTimeSeriesChart
                label={`Forward and return throughput, ${describeRange(range)}`}
                data={linkRows}
                format={formatBps}
                series={[{ key: 'down', label: 'forward (down)', color: COLORS.accelerate }, { key: 'up', label: 'return (up)', color: COLORS.cache }]}
              />
            )}
          </ChartCard>
          <ChartCard title="Accelerated, cached and bypassed throughput">
            <LazyTimeSeriesChart
              label={`Throughput over the satellite by action, ${describeRange(range)}`}
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
              label={`Mean smoothed RTT of the satellite and terrestrial legs, ${describeRange(range)}`}
              data={seriesToRows(rtt.data)}
              format={(v) => `${v.toFixed(0)} ms`}
              series={[{ key: 'satellite', label: 'satellite', color: COLORS.accelerate }, { key: 'terrestrial', label: 'terrestrial', color: COLORS.cache }]}
            />
          </ChartCard>
          <ChartCard title="Cache hit ratio">
            <LazyTimeSeriesChart
              label={`Cache hit ratio, ${describeRange(range)}`}
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
