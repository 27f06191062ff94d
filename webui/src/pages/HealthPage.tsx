import { Alert, Badge, Box, Group, List, Paper, SimpleGrid, Stack, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { endpoints } from '../api/endpoints';
import { useAuth } from '../auth/useAuth';
import { keys } from '../api/keys';
import { KeyValueTable } from '../components/KeyValueTable';
import { PageHeader } from '../components/PageHeader';
import { StatCard } from '../components/StatCard';
import { TlsCertificateCard } from '../components/TlsCertificateCard';
import { QueryView } from '../components/StateViews';
import { formatDuration } from '../lib/format';
import { gatewayHealth } from '../lib/health';

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
                <StatCard label="Fail-open" value={gw ? (gw.fail_open ? 'yes' : 'no') : '—'} color={gw?.fail_open ? 'red' : undefined} hint="traffic bypasses the splitter" />
              </SimpleGrid>
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
