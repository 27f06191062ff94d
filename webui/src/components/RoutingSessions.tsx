import { Badge, Group, Stack, Text, Tooltip } from '@mantine/core';
import type { BgpNeighbor, FleetMember } from '../api/endpoints';
import { formatDuration } from '../lib/format';

/** What is wrong with a member's BGP/BFD sessions, one sentence each (the gateway's own words); empty when
 *  every session is Established with BFD up, when the gateway has no FRR, or when it did not answer at all. */
export function routingProblems(m: FleetMember): string[] {
  if (m.routing_error) return [`routing state not readable: ${String(m.routing_error.message ?? m.routing_error.code)}`];
  if (!m.routing?.available) return [];
  return m.routing.problems;
}

// Badges keep their full text: squeezed in a table cell they would be cut to "E…".
const keep = { flexShrink: 0 } as const;

function SessionLine({ n }: { n: BgpNeighbor }) {
  const up = n.state === 'Established';
  const bfdUp = n.bfd?.status === 'up';
  return (
    <Stack gap={2} data-peer={n.address}>
      <Text size="sm" ff="monospace">
        {n.hostname ? `${n.hostname} ${n.address}` : n.address}
      </Text>
      <Group gap={4}>
        <Badge size="sm" color={up ? 'green' : 'red'} variant="light" style={keep}>
          {n.admin_shutdown ? `${n.state} (admin)` : n.state}
        </Badge>
        {n.bfd ? (
          <Badge size="sm" color={bfdUp ? 'green' : 'red'} variant="light" style={keep}>
            BFD {n.bfd.status}
          </Badge>
        ) : (
          n.bfd_configured && (
            <Badge size="sm" color="red" variant="light" style={keep}>
              BFD missing
            </Badge>
          )
        )}
        <Text size="xs" c="dimmed">
          {up ? `${formatDuration(n.uptime_s)} · ` : ''}prefixes {n.prefixes_received} in / {n.prefixes_sent} out
        </Text>
      </Group>
    </Stack>
  );
}

/** A member's BGP sessions with their BFD state, as the FRR beside it reports them (GET /v1/routing). */
export function RoutingSessions({ m }: { m: FleetMember }) {
  if (m.routing_error) return <Text size="sm">not readable</Text>;
  const r = m.routing;
  if (!r) return <Text size="sm">—</Text>;
  if (!r.available) {
    return (
      <Tooltip label={r.reason ?? ''} multiline w={320}>
        <Text size="sm" c="dimmed">
          no FRR
        </Text>
      </Tooltip>
    );
  }
  if (r.neighbors.length === 0) return <Text size="sm">no BGP neighbors</Text>;
  return (
    <Stack gap="xs">
      {r.neighbors.map((n) => (
        <SessionLine key={n.address} n={n} />
      ))}
    </Stack>
  );
}
