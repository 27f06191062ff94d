import { Alert, Badge, Table, Text } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { endpoints, type FleetMember } from '../api/endpoints';
import { keys } from '../api/keys';
import { PageHeader } from '../components/PageHeader';
import { RoutingSessions, routingProblems } from '../components/RoutingSessions';
import { QueryView } from '../components/StateViews';
import { formatBps, formatDuration } from '../lib/format';

/** A member's health badge: unreachable (red), degraded (orange: its own problems, or routing sessions not all
 *  up), ok (green). */
function HealthBadge({ m }: { m: FleetMember }) {
  if (!m.reachable) return <Badge color="red">unreachable</Badge>;
  const status = m.status === 'ok' && routingProblems(m).length > 0 ? 'degraded' : m.status;
  return <Badge color={status === 'ok' ? 'green' : 'orange'}>{status}</Badge>;
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
          const routingDown = f.gateways.filter((m) => m.reachable && routingProblems(m).length > 0);
          return (
            <>
              {stale.length > 0 && (
                <Alert color="orange" title="Not on the active version" role="alert" mb="md">
                  {stale.map((m) => m.gateway).join(', ')} {stale.length === 1 ? 'runs' : 'run'} another revision than {f.active_revision}.
                </Alert>
              )}
              {routingDown.length > 0 && (
                <Alert color="orange" title="Routing sessions not all up" role="alert" mb="md">
                  {routingDown.map((m) => m.gateway).join(', ')}: see the problems below. The routers send a gateway
                  no new flows while its sessions are down.
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
                    <Table.Th style={{ minWidth: 240 }}>BGP / BFD</Table.Th>
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
                        <RoutingSessions m={m} />
                      </Table.Td>
                      <Table.Td>
                        <Text size="sm">
                          {m.error ? String(m.error.message ?? m.error.code) : [...m.problems, ...routingProblems(m)].join('; ') || 'none'}
                        </Text>
                      </Table.Td>
                    </Table.Tr>
                  ))}
                </Table.Tbody>
              </Table>
              <Text size="sm" c="dimmed" mt="sm">
                Active version: {f.active_revision ?? 'none applied yet'}. BGP / BFD: each gateway's sessions as the FRR
                beside it reports them (&quot;no FRR&quot; on a gateway without one).
              </Text>
            </>
          );
        }}
      </QueryView>
    </>
  );
}
