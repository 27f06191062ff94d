import { Paper, Table, Text, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { endpoints, type SiteNow } from '../../api/endpoints';
import { keys } from '../../api/keys';
import { overlaps } from '../../lib/cidr';
import { formatBps } from '../../lib/format';

/** The hub's sites that hold any of the terminal's prefixes (or carry its name). */
export function sitesOf(sites: SiteNow[], name: string, prefixes: string[]): SiteNow[] {
  return sites.filter((s) => s.site === name || s.prefixes.some((p) => prefixes.some((q) => overlaps(p, q))));
}

/** The hub's per-site figures for this terminal's site: what the hub's collector saw last second. */
export function TerminalSites({ name, prefixes }: { name: string; prefixes: string[] }) {
  const sites = useQuery({ queryKey: keys.sites, queryFn: endpoints.sites, refetchInterval: 2000 });
  const mine = sitesOf(sites.data?.sites ?? [], name, prefixes);
  return (
    <Paper withBorder p="md" component="section" aria-labelledby="terminal-sites">
      <Title order={3} size="h4" id="terminal-sites">
        Its sites at the hub
      </Title>
      <Text size="xs" c="dimmed" mb="sm">
        Counted by this hub for the sites that cover its prefixes, over the last second.
      </Text>
      {sites.error ? (
        <Text size="sm" c="red">
          The hub's site figures could not be read.
        </Text>
      ) : mine.length === 0 ? (
        <Text size="sm" c="dimmed">
          No site of this hub covers {prefixes.join(', ')} (the hub's config names its sites and their prefixes).
        </Text>
      ) : (
        <Table aria-label="Its sites at the hub" fz="sm" verticalSpacing={4}>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Site</Table.Th>
              <Table.Th>↓ to clients</Table.Th>
              <Table.Th>↑ from clients</Table.Th>
              <Table.Th>Flows</Table.Th>
              <Table.Th>RTT</Table.Th>
              <Table.Th>Retransmits/s</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {mine.map((s) => (
              <Table.Tr key={s.site}>
                <Table.Td>{s.site}</Table.Td>
                <Table.Td>{formatBps(s.down_bps)}</Table.Td>
                <Table.Td>{formatBps(s.up_bps)}</Table.Td>
                <Table.Td>{s.flows}</Table.Td>
                <Table.Td>{s.rtt_ms == null ? '—' : `${s.rtt_ms.toFixed(0)} ms`}</Table.Td>
                <Table.Td>{s.retrans_ps.toFixed(1)}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
    </Paper>
  );
}
