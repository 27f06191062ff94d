import { Table, Text } from '@mantine/core';
import type { SatelliteStats } from '../api/endpoints';
import { formatBytes } from '../lib/format';

type Peer = NonNullable<SatelliteStats['peer']>;

/** What each line means, in the gateway's words (docs/splitter.md, *Stats* and *Redundancy*). */
const LINES: { label: string; value: (p: Peer) => string; means: string }[] = [
  { label: 'Flows on the peer path', value: (p) => p.flows.toLocaleString(), means: 'Flows that started on a warm connection between terminal and hub' },
  {
    label: 'Fell back to the direct path',
    value: (p) => p.fallbacks.toLocaleString(),
    means: "A warm connection refused OPEN's first byte; nothing of the flow had reached the hub",
  },
  {
    label: 'Went direct, no ready connection',
    value: (p) => p.pool_empty.toLocaleString(),
    means: 'New flows that found every warm connection taken (a burst beyond peer.pool_size, or the hub out of reach): each paid the satellite handshake',
  },
  { label: 'Refused by the hub', value: (p) => p.refused.toLocaleString(), means: 'Peer connections and flows the hub refused (identity, prefixes, policy)' },
  {
    label: 'Reset on a failed connection',
    value: (p) => p.failed.toLocaleString(),
    means: 'Peer flows reset because their connection to the hub failed; a flow is never replayed on another path',
  },
  {
    label: 'First bytes sent twice',
    value: (p) => `${formatBytes(p.redundant.bytes)} in ${p.redundant.packets.toLocaleString()} packets`,
    means: 'Copies of the first bytes of each peer connection (peer.redundancy), since the last apply',
  },
];

/** The peer path's counters since the gateway started (the collector's last reading of /v1/counters). */
export function PeerPathCounters({ peer }: { peer: SatelliteStats['peer'] }) {
  if (!peer) return <Text c="dimmed" size="sm">The peer path's counters arrive with the collector's first reading.</Text>;
  return (
    <Table aria-label="Peer path" verticalSpacing={4} fz="sm">
      <Table.Tbody>
        {LINES.map((l) => (
          <Table.Tr key={l.label} title={l.means}>
            <Table.Th scope="row" fw="normal">
              {l.label}
            </Table.Th>
            <Table.Td ta="right">{l.value(peer)}</Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}
