import { Alert, Badge, Table, Text } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { endpoints, type FleetMember } from '../api/endpoints';
import { keys } from '../api/keys';
import { PageHeader } from '../components/PageHeader';
import { QueryView } from '../components/StateViews';
import { formatBps, formatDuration } from '../lib/format';

/** A member's health badge: unreachable (red), degraded (orange), ok (green). */
function HealthBadge({ m }: { m: FleetMember }) {
  if (!m.reachable) return <Badge color="red">unreachable</Badge>;
  return <Badge color={m.status === 'ok' ? 'green' : 'orange'}>{m.status}</Badge>;
}

export default function FleetPage() {
  const fleet = useQuery({ queryKey: keys.fleet, queryFn: endpoints.fleet, refetchInterval: 2000 });
  return (
    <>
      <PageHeader
        title="Fleet"
        description="Every gateway this control plane manages: the local one and those registered by address (mutual TLS). A gateway on another revision than the active version stands out."
      />
      <QueryView query={fleet}>
        {(f) => {
          const stale = f.gateways.filter((m) => m.reachable && f.active_revision && m.revision !== f.active_revision);
          return (
            <>
              {stale.length > 0 && (
                <Alert color="orange" title="Not on the active version" role="alert" mb="md">
                  {stale.map((m) => m.gateway).join(', ')} {stale.length === 1 ? 'runs' : 'run'} another revision than {f.active_revision}.
                </Alert>
              )}
              <Table striped aria-label="Fleet gateways">
                <Table.Thead>
                  <Table.Tr>
                    <Table.Th>Gateway</Table.Th>
                    <Table.Th>Address</Table.Th>
                    <Table.Th>Health</Table.Th>
                    <Table.Th>Revision</Table.Th>
                    <Table.Th>Live flows</Table.Th>
                    <Table.Th>Throughput down / up</Table.Th>
                    <Table.Th>Up</Table.Th>
                    <Table.Th>Problems</Table.Th>
                  </Table.Tr>
                </Table.Thead>
                <Table.Tbody>
                  {f.gateways.map((m) => (
                    <Table.Tr key={m.gateway} data-gateway={m.gateway}>
                      <Table.Td>{m.gateway}</Table.Td>
                      <Table.Td>
                        <Text size="sm" ff="monospace">
                          {m.address}
                        </Text>
                      </Table.Td>
                      <Table.Td>
                        <HealthBadge m={m} />
                      </Table.Td>
                      <Table.Td>{m.revision ?? '—'}</Table.Td>
                      <Table.Td>{m.flows_live ?? '—'}</Table.Td>
                      <Table.Td>
                        {m.throughput_down_bps == null ? '—' : `${formatBps(m.throughput_down_bps)} / ${formatBps(m.throughput_up_bps)}`}
                      </Table.Td>
                      <Table.Td>{m.uptime_s == null ? '—' : formatDuration(m.uptime_s)}</Table.Td>
                      <Table.Td>
                        <Text size="sm">{m.error ? String(m.error.message ?? m.error.code) : m.problems.join('; ') || 'none'}</Text>
                      </Table.Td>
                    </Table.Tr>
                  ))}
                </Table.Tbody>
              </Table>
              <Text size="sm" c="dimmed" mt="sm">
                Active version: {f.active_revision ?? 'none applied yet'}. BGP/BFD state of the routers is not read by the control plane.
              </Text>
            </>
          );
        }}
      </QueryView>
    </>
  );
}
