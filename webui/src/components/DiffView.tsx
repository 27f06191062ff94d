import { Badge, Table, Text } from '@mantine/core';
import type { DiffEntry } from '../api/endpoints';

const OP_COLOR = { added: 'green', removed: 'red', changed: 'yellow' } as const;

function show(v: unknown): string {
  if (v === undefined || v === null) return '';
  return typeof v === 'string' ? v : JSON.stringify(v);
}

/** JSON-path level differences between two config versions. */
export function DiffView({ changes }: { changes: DiffEntry[] }) {
  if (changes.length === 0) return <Text c="dimmed">No differences.</Text>;
  return (
    <Table.ScrollContainer minWidth={600}>
      <Table aria-label="Differences" verticalSpacing={4}>
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Path</Table.Th>
            <Table.Th>Change</Table.Th>
            <Table.Th>Before</Table.Th>
            <Table.Th>After</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
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
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}
