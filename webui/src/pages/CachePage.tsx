import { Alert, Button, Group, Paper, SimpleGrid, Stack, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { endpoints } from '../api/endpoints';
import { ApiError, errorMessage } from '../api/errors';
import { keys } from '../api/keys';
import { KeyValueTable } from '../components/KeyValueTable';
import { PageHeader } from '../components/PageHeader';
import { StatCard } from '../components/StatCard';
import { QueryView } from '../components/StateViews';
import { formatBytes, formatPercent } from '../lib/format';
import { cacheFullness } from '../lib/health';

const num = (v: unknown) => (typeof v === 'number' ? v : null);

export default function CachePage() {
  const queryClient = useQueryClient();
  const stats = useQuery({ queryKey: keys.cache, queryFn: endpoints.cacheStats, refetchInterval: 5000 });
  const running = useQuery({ queryKey: keys.running, queryFn: endpoints.running });
  const [url, setUrl] = useState('');
  const [urlError, setUrlError] = useState<string | undefined>();
  const purge = useMutation({
    mutationFn: endpoints.cachePurge,
    onSuccess: () => queryClient.invalidateQueries({ queryKey: keys.cache }),
    onError: (e) => setUrlError(e instanceof ApiError ? (e.fieldErrors.url ?? undefined) : undefined),
  });
  // What the gateway runs, not the desired version: the two differ until it is applied.
  const cacheCfg = running.data?.config?.cache;

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
      <PageHeader title="Cache" description="The HTTP cache on the satellite side: hits are served without crossing the link." />
      <Stack>
        {cacheCfg && !cacheCfg.enabled && (
          <Alert color="gray" title="Cache disabled">
            The gateway runs with the cache off; port 80 traffic is accelerated instead. Counters below are the gateway&apos;s last values.
          </Alert>
        )}
        <QueryView query={stats}>
          {(s) => {
            const requests = num(s.requests) ?? 0;
            const hits = num(s.hits) ?? 0;
            const full = cacheFullness(s);
            return (
              <Stack>
                <SimpleGrid cols={{ base: 2, sm: 4 }}>
                  <StatCard label="Hit ratio" value={formatPercent(requests ? hits / requests : null)} hint={`${hits.toLocaleString()} hits / ${requests.toLocaleString()} requests`} />
                  <StatCard label="Bytes saved" value={formatBytes(s.bytes_saved_satellite)} hint="served from the cache" />
                  <StatCard label="Objects" value={(s.store_entries ?? 0).toLocaleString()} />
                  <StatCard label="Store" value={full == null ? (cacheCfg ? `${cacheCfg.disk_mb} MB disk` : '—') : formatPercent(full, 0)} hint={full == null ? `${cacheCfg?.memory_mb ?? '—'} MB memory` : 'full'} color={full != null && full > 0.95 ? 'orange' : undefined} />
                </SimpleGrid>
                <Paper withBorder p="md">
                  <Title order={3} size="h5" mb="xs">
                    All counters
                  </Title>
                  <KeyValueTable data={s} label="Cache counters" />
                </Paper>
              </Stack>
            );
          }}
        </QueryView>
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
      </Stack>
    </>
  );
}
