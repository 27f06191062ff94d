import { Paper, Table, Text, Title } from '@mantine/core';
import type { SiteReport } from '../../api/managed';
import { formatBytes, formatTime } from '../../lib/format';

/** The terminal's per-site figures as it reported them: counted by its own gateway (its Sites page), not the hub's. */
export function TerminalReportedSites({ sites, reportedAt }: { sites: SiteReport[]; reportedAt: number | null }) {
  return (
    <Paper withBorder p="md" component="section" aria-labelledby="terminal-reported-sites">
      <Title order={3} size="h4" id="terminal-reported-sites">
        Its sites as it reports them
      </Title>
      <Text size="xs" c="dimmed" mb="sm">
        Counted by the terminal itself{reportedAt ? `, as of its report at ${formatTime(reportedAt)}` : ''}: bytes since its gateway started, flows live then.
      </Text>
      {sites.length === 0 ? (
        <Text size="sm" c="dimmed">
          {reportedAt ? 'Its last report named no site.' : 'No report yet.'}
        </Text>
      ) : (
        <Table aria-label="Its sites as it reports them" fz="sm" verticalSpacing={4}>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Site</Table.Th>
              <Table.Th>Received</Table.Th>
              <Table.Th>Sent</Table.Th>
              <Table.Th>Live flows</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {sites.map((s) => (
              <Table.Tr key={s.name}>
                <Table.Td>{s.name}</Table.Td>
                <Table.Td>{formatBytes(s.rx_bytes)}</Table.Td>
                <Table.Td>{formatBytes(s.tx_bytes)}</Table.Td>
                <Table.Td>{s.live_flows}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
    </Paper>
  );
}
