import { Table, type TableProps } from '@mantine/core';
import type { ReactNode } from 'react';

interface ScrollTableProps extends Omit<TableProps, 'children'> {
  /** Below this width the table scrolls sideways instead of squeezing its columns. */
  minWidth: number;
  /** Column headings, left to right. */
  columns: string[];
  /** Adds a last column for each row's buttons, headed "Actions" for screen readers only. */
  actions?: boolean;
  /** The body rows (Table.Tr). */
  children: ReactNode;
}

/** The dashboard's list table: a heading row of plain labels over the given rows, scrolling on narrow screens. */
export function ScrollTable({ minWidth, columns, actions = false, children, ...table }: ScrollTableProps) {
  return (
    <Table.ScrollContainer minWidth={minWidth}>
      <Table {...table}>
        <Table.Thead>
          <Table.Tr>
            {columns.map((label) => (
              <Table.Th key={label}>{label}</Table.Th>
            ))}
            {actions && (
              <Table.Th>
                <span className="visually-hidden">Actions</span>
              </Table.Th>
            )}
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>{children}</Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}
