import { Alert, Button, Group, Paper, SimpleGrid, Stack, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { endpoints } from '../api/endpoints';
import { ApiError, errorMessage } from '../api/errors';
import { keys } from '../api/keys';
import { KeyValueTable } from '../components/KeyValueTable';
import { PageHeader } from '../components/PageHeader';
import { useCan } from '../auth/roles';
import { StatCard } from '../components/StatCard';
import { QueryView } from '../components/StateViews';
import { formatBytes, formatPercent } from '../lib/format';
import { cacheView, savingsWords } from '../lib/cache';
import { gatewayHealth } from '../lib/health';


function bytesOf(used: number | null, capacity: number | null): string {
  if (used == null) return capacity ? `— of ${formatBytes(capacity)}` : '—';
  return capacity ? `${formatBytes(used)} of ${formatBytes(capacity)}` : formatBytes(used);
}

export default function CachePage() {
  const canWrite = useCan()('operator');
  const queryClient = useQueryClient();
  const stats = useQuery({ queryKey: keys.cache, queryFn: endpoints.cacheStats, refetchInterval: 5000 });
  const health = useQuery({ queryKey: keys.health, queryFn: endpoints.health, refetchInterval: 5000 });
  // What a hit saves depends on where this cache is (the role the gateway runs).
  const role = gatewayHealth(health.data)?.role ?? null;
  const savings = savingsWords(role);
  const [url, setUrl] = useState('');
  const [urlError, setUrlError] = useState<string | undefined>();
  const purge = useMutation({
    mutationFn: endpoints.cachePurge,
    onSuccess: () => queryClient.invalidateQueries({ queryKey: keys.cache }),
    onError: (e) => setUrlError(e instanceof ApiError ? (e.fieldErrors.url ?? undefined) : undefined),
  });
  // What the gateway runs, not the desired config (a version may not be applied yet).
  const view = stats.data ? cacheView(stats.data) : null;
  const notServing = (gatewayHealth(health.data)?.problems ?? []).filter((p) => p.startsWith('cache:'));

  const submitUrl = (e: FormEvent) => {
    e.preventDefault();
    if (!/^https?:\/\/\S+$/.test(url)) {
      setUrlError('An absolute http:// or https:// URL');
      return;
    }
    setUrlError(undefined);
    purge.mutate({ url });
  };

  return (
    <>
      <PageHeader title="Cache" description={role === 'terminal' ? 'The HTTP cache at the terminal: hits are served without crossing the satellite.' : "The HTTP cache at the hub: hits save the terrestrial fetch (backhaul); they still cross the satellite to the client."} />
      <Stack>
        {view && !view.enabled && (
          <Alert color="gray" title="Cache off">
            The configuration the gateway runs has the cache off: port 80 traffic is accelerated, not cached. The figures below are
            from when it last ran.
          </Alert>
        )}
        {view && view.enabled && notServing.length > 0 && (
          <Alert color="orange" title="Cache not serving" role="alert">
            {notServing.join('; ')}
          </Alert>
        )}
        <QueryView query={stats}>
          {(s) => {
            const v = cacheView(s);
            return (
              <Stack>
                <SimpleGrid cols={{ base: 2, sm: 4 }}>
                  <StatCard
                    label="Requests served from the cache"
                    value={formatPercent(v.hitRatio)}
                    hint={`${v.hits.toLocaleString()} of ${(v.hits + v.misses).toLocaleString()} cacheable requests`}
                  />
                  <StatCard
                    label={savings.title}
                    value={formatBytes(v.savedBytes)}
                    hint={`${savings.hint}${v.byteHitRatio != null ? ` (${formatPercent(v.byteHitRatio)} of the bytes sent to clients)` : ''}`}
                  />
                  <StatCard label="Objects stored" value={v.objects == null ? '—' : v.objects.toLocaleString()} hint={v.running ? 'in the store now' : 'Squid is not running'} />
                  <StatCard
                    label="Disk store used"
                    value={v.fullness == null ? '—' : formatPercent(v.fullness, 0)}
                    hint={v.diskCapacity ? bytesOf(v.diskUsed, v.diskCapacity) : `memory: ${bytesOf(v.memoryUsed, v.memoryCapacity)}`}
                    color={v.fullness != null && v.fullness > 0.95 ? 'orange' : undefined}
                  />
                </SimpleGrid>
                <Paper withBorder p="md">
                  <Title order={3} size="h5" mb="xs">
                    In detail
                  </Title>
                  <KeyValueTable
                    label="Cache figures"
                    data={{
                      'Cache in the running configuration': v.enabled ? 'on' : 'off',
                      'Squid running': v.running ? 'yes' : 'no',
                      'Squid version': String(s.squid_version ?? '—'),
                      Requests: v.requests.toLocaleString(),
                      'Served from the cache (hits)': v.hits.toLocaleString(),
                      'Fetched from the origin (misses)': v.misses.toLocaleString(),
                      'Refused (clients outside the served subnets)': String(s.denied ?? 0),
                      'Sent to clients': formatBytes(v.toClientsBytes),
                      [role === 'terminal' ? 'Fetched from origins over the satellite' : 'Fetched from origins']: formatBytes(v.fromOriginBytes),
                      [savings.title]: formatBytes(v.savedBytes),
                      'Disk store': bytesOf(v.diskUsed, v.diskCapacity),
                      'Memory store': bytesOf(v.memoryUsed, v.memoryCapacity),
                      'Collapsed forwarding': s.collapsed_forwarding_effective ? 'on' : s.collapsed_forwarding_requested ? 'requested, left off' : 'off',
                      Problems: v.problems.length ? v.problems.join('; ') : 'none',
                    }}
                  />
                </Paper>
              </Stack>
            );
          }}
        </QueryView>
        {canWrite && (
        <Paper withBorder p="md" component="section" aria-labelledby="purge-title">
          <Title order={3} size="h4" id="purge-title" mb="sm">
            Purge
          </Title>
          <form onSubmit={submitUrl} noValidate>
            <Group align="flex-start" wrap="wrap">
              <TextInput label="URL" placeholder="http://example.com/file.iso" value={url} onChange={(e) => setUrl(e.currentTarget.value)} error={urlError} style={{ flex: '1 1 320px' }} />
              <Button type="submit" mt={25} loading={purge.isPending && purge.variables && 'url' in purge.variables}>
                Purge URL
              </Button>
              <Button
                color="red"
                variant="light"
                mt={25}
                loading={purge.isPending && purge.variables && 'all' in purge.variables}
                onClick={() => {
                  if (window.confirm('Purge every cached object? The next requests cross the satellite link again.')) purge.mutate({ all: true });
                }}
              >
                Purge everything
              </Button>
            </Group>
          </form>
          {purge.data && (
            <Alert color="green" mt="sm" role="status">
              Purged {String(purge.data.purged ?? 0)} object(s).
            </Alert>
          )}
          {purge.error && !urlError && (
            <Alert color="red" mt="sm" role="alert">
              {errorMessage(purge.error)}
            </Alert>
          )}
        </Paper>
        )}
      </Stack>
    </>
  );
}
