import { Table } from '@mantine/core';

function show(v: unknown): string {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'number') return Number.isInteger(v) ? v.toLocaleString() : v.toFixed(3);
  if (typeof v === 'string' || typeof v === 'boolean') return String(v);
  return JSON.stringify(v);
}

/** Any flat JSON object as a two-column table (for pass-through answers whose fields may grow). */
export function KeyValueTable({ data, label }: { data: Record<string, unknown>; label: string }) {
  return (
    <Table aria-label={label} verticalSpacing={4} fz="sm">
      <Table.Tbody>
        {Object.entries(data).map(([k, v]) => (
          <Table.Tr key={k}>
            <Table.Th className="mono" w="40%">{k}</Table.Th>
            <Table.Td className="mono" style={{ wordBreak: 'break-all' }}>{show(v)}</Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}
