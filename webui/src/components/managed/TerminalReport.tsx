import { Alert, Badge, Group, List, Paper, SimpleGrid, Stack, Text, Title } from '@mantine/core';
import type { ReactNode } from 'react';
import type { TerminalDetail } from '../../api/managed';
import { formatBps, formatBytes, formatTime } from '../../lib/format';
import { useCounterRate } from './useCounterRate';

function Figure({ label, children }: { label: string; children: ReactNode }) {
  return (
    <Stack gap={0}>
      <Text size="xs" c="dimmed">
        {label}
      </Text>
      <Text fw={600} data-figure={label}>
        {children}
      </Text>
    </Stack>
  );
}

export function HealthBadge({ ok }: { ok: boolean | null }) {
  if (ok == null) return <Badge color="gray">no report</Badge>;
  return ok ? <Badge color="green">healthy</Badge> : <Badge color="red">problems</Badge>;
}

/** What a managed terminal last reported to its hub, and how the hub sees it on the peer path. */
export function TerminalReport({ d }: { d: TerminalDetail }) {
  const rate = useCounterRate(d.last_report_at, d.rx_bytes, d.tx_bytes);
  const t = d.terminal;
  return (
    <Paper withBorder p="md" component="section" aria-labelledby="terminal-report">
      <Group justify="space-between" mb="sm">
        <Title order={3} size="h4" id="terminal-report">
          Its report
        </Title>
        <Group gap="xs">
          {d.managed ? <Badge color="blue">managed from here</Badge> : <Badge color="gray">not managed</Badge>}
          <HealthBadge ok={d.health_ok} />
        </Group>
      </Group>
      {!d.managed && (
        <Text size="sm" c="dimmed" mb="sm">
          It was enrolled by its fingerprint, not with a token: it takes no config versions from the hub.
        </Text>
      )}
      <SimpleGrid cols={{ base: 2, sm: 4 }} spacing="md">
        <Figure label="Last report">{d.last_report_at ? formatTime(d.last_report_at) : 'never'}</Figure>
        <Figure label="Running revision">{d.revision ?? '—'}</Figure>
        <Figure label="Its local version">{d.local_version_id ?? '—'}</Figure>
        <Figure label="Software">{d.software ?? '—'}</Figure>
        <Figure label="Live flows">{d.live_flows ?? '—'}</Figure>
        <Figure label="Received">
          {formatBytes(d.rx_bytes)}
          {rate && ` · ${formatBps(rate.rx_bps)}`}
        </Figure>
        <Figure label="Sent">
          {formatBytes(d.tx_bytes)}
          {rate && ` · ${formatBps(rate.tx_bps)}`}
        </Figure>
        <Figure label="Applied hub version">{d.applied_version_id ?? '—'}</Figure>
        <Figure label="Peer path">{t.connected ? 'connected' : t.applied ? 'not connected' : 'not applied yet'}</Figure>
        <Figure label="Idle / live at the hub">
          {t.idle_connections} / {t.live_flows}
        </Figure>
        <Figure label="Site prefixes">{t.prefixes.join(', ')}</Figure>
        <Figure label="Last seen at the hub">{t.last_seen ? formatTime(t.last_seen) : 'never'}</Figure>
      </SimpleGrid>
      {!rate && d.rx_bytes != null && (
        <Text size="xs" c="dimmed" mt="xs">
          Throughput shows from its next report on (counters between two reports).
        </Text>
      )}
      {d.problems.length > 0 && (
        <Alert color="red" mt="sm" title="Problems it reports" role="alert">
          <List size="sm">
            {d.problems.map((p) => (
              <List.Item key={p}>{p}</List.Item>
            ))}
          </List>
        </Alert>
      )}
    </Paper>
  );
}
