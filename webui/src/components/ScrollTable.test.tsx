import { Table } from '@mantine/core';
import { screen, within } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { renderWithProviders } from '../test/render';
import { ScrollTable } from './ScrollTable';

function row(name: string) {
  return (
    <Table.Tr key={name}>
      <Table.Td>{name}</Table.Td>
      <Table.Td>tcp</Table.Td>
    </Table.Tr>
  );
}

describe('ScrollTable', () => {
  it('heads the given rows with the column labels and passes table props through', () => {
    renderWithProviders(
      <ScrollTable minWidth={600} columns={['Name', 'Protocol']} aria-label="Rules">
        {['a', 'b'].map(row)}
      </ScrollTable>,
    );
    const table = screen.getByRole('table', { name: 'Rules' });
    expect(within(table).getAllByRole('columnheader').map((h) => h.textContent)).toEqual(['Name', 'Protocol']);
    const [head, ...body] = within(table).getAllByRole('row');
    expect(head.parentElement?.tagName).toBe('THEAD');
    expect(body.map((r) => r.textContent)).toEqual(['atcp', 'btcp']);
  });

  it('adds an actions column that only screen readers label', () => {
    renderWithProviders(
      <ScrollTable minWidth={600} columns={['Name', 'Protocol']} actions aria-label="Rules">
        {[]}
      </ScrollTable>,
    );
    const headers = within(screen.getByRole('table', { name: 'Rules' })).getAllByRole('columnheader');
    expect(headers.map((h) => h.textContent)).toEqual(['Name', 'Protocol', 'Actions']);
    expect(headers[2].firstElementChild).toHaveClass('visually-hidden');
  });
});
