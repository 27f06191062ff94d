import { Badge, Table, Text } from '@mantine/core';
import type { DiffEntry } from '../api/endpoints';
import { ScrollTable } from './ScrollTable';

const OP_COLOR = { added: 'green', removed: 'red', changed: 'yellow' } as const;

function show(v: unknown): string {
  if (v === undefined || v === null) return '';
  return typeof v === 'string' ? v : JSON.stringify(v);
}

/** JSON-path level differences between two config versions. */
export function DiffView({ changes }: { changes: DiffEntry[] }) {
  if (changes.length === 0) return <Text c="dimmed">No differences.</Text>;
  return (
    <ScrollTable minWidth={600} columns={['Path', 'Change', 'Before', 'After']} aria-label="Differences" verticalSpacing={4}>
      {changes.map((c) => (
        <Table.Tr key={`${c.op}${c.path}`}>
          <Table.Td className="mono">{c.path}</Table.Td>
          <Table.Td>
            <Badge size="sm" color={OP_COLOR[c.op]} variant="light">
              {c.op}
            </Badge>
          </Table.Td>
          <Table.Td>
            <pre className="diff diff-del">{show(c.old)}</pre>
          </Table.Td>
          <Table.Td>
            <pre className="diff diff-add">{show(c.new)}</pre>
          </Table.Td>
        </Table.Tr>
      ))}
    </ScrollTable>
  );
}
