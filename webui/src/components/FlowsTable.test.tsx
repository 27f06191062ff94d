import { screen, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { makeFlows } from '../lib/fake-flows';
import { renderWithProviders } from '../test/render';
import { filterAndSortFlows, FlowsTable, ROW_HEIGHT } from './FlowsTable';

function bodyRows() {
  const table = screen.getByRole('table', { name: 'Flows' });
  return within(table).getAllByRole('row').filter((r) => within(r).queryAllByRole('cell').length > 0);
}

// jsdom has no layout: give the scroll viewport the size a browser would (its inline height).
beforeEach(() => {
  const inlineHeight = function (this: HTMLElement) {
    return parseFloat(this.style.height) || 0;
  };
  vi.spyOn(HTMLElement.prototype, 'clientHeight', 'get').mockImplementation(inlineHeight);
  vi.spyOn(HTMLElement.prototype, 'offsetHeight', 'get').mockImplementation(inlineHeight);
  vi.spyOn(HTMLElement.prototype, 'clientWidth', 'get').mockReturnValue(1200);
  vi.spyOn(HTMLElement.prototype, 'offsetWidth', 'get').mockReturnValue(1200);
});
afterEach(() => vi.restoreAllMocks());

describe('FlowsTable', () => {
  it('renders only the visible rows of 10,000 flows', () => {
    const height = 20 * ROW_HEIGHT;
    renderWithProviders(<FlowsTable flows={makeFlows(10_000)} height={height} />);
    expect(screen.getByTestId('flow-count')).toHaveTextContent('10,000 of 10,000 flows');
    const rows = bodyRows();
    // 20 visible rows plus the overscan (8) on one side; never anywhere near 10,000.
    expect(rows.length).toBeGreaterThanOrEqual(20);
    expect(rows.length).toBeLessThanOrEqual(40);
    // The scroll area is as tall as all rows so the scroll bar is honest.
    const inner = screen.getByTestId('flows-scroll').firstElementChild as HTMLElement;
    expect(inner.style.height).toBe(`${10_000 * ROW_HEIGHT}px`);
  });

  it('filters by search text and sorts by column', async () => {
    const user = userEvent.setup();
    renderWithProviders(<FlowsTable flows={makeFlows(300)} height={10 * ROW_HEIGHT} />);
    await user.type(screen.getByLabelText('Search'), ':5001');
    expect(screen.getByTestId('flow-count')).toHaveTextContent('150 of 300 flows');
    await user.click(screen.getByRole('button', { name: /^ID/ }));
    const first = bodyRows()[0];
    expect(within(first).getByRole('link')).toHaveTextContent(/^1$/);
    expect(screen.getByRole('columnheader', { name: /ID/ })).toHaveAttribute('aria-sort', 'ascending');
    await user.click(screen.getByRole('button', { name: /^ID/ }));
    expect(within(bodyRows()[0]).getByRole('link')).toHaveTextContent(/^299$/);
  });

  it('shows the path each flow took', () => {
    renderWithProviders(<FlowsTable flows={makeFlows(8)} height={10 * ROW_HEIGHT} />);
    expect(screen.getByRole('columnheader', { name: /Path/ })).toBeInTheDocument();
    expect(screen.getByRole('textbox', { name: 'Path' })).toBeInTheDocument();
    const rows = bodyRows();
    expect(rows.filter((r) => r.textContent?.includes('peer path'))).toHaveLength(6);
    expect(rows.filter((r) => r.textContent?.includes('direct'))).toHaveLength(2);
  });

  it('sorts and filters by path', () => {
    const flows = makeFlows(8).map((f, i) => (i === 1 ? { ...f, path: 'direct' as const } : f));
    const sorted = filterAndSortFlows(flows, { search: '', action: null, state: null, path: null, sort: 'path', dir: 'asc' });
    expect(sorted.slice(0, 3).map((f) => f.id)).toEqual([1, 2, 5]);
    expect(filterAndSortFlows(flows, { search: '', action: null, state: null, path: 'direct', sort: 'id', dir: 'asc' }).map((f) => f.id)).toEqual([1, 2, 5]);
  });

  it("shows each flow's satellite leg: congestion control, a badge for why, the share retransmitted", () => {
    renderWithProviders(<FlowsTable flows={makeFlows(8)} height={10 * ROW_HEIGHT} />);
    expect(screen.getByRole('columnheader', { name: /Sat CC/ })).toBeInTheDocument();
    const cellOf = (id: number) => {
      const row = bodyRows().find((r) => within(r).getByRole('link').textContent === String(id));
      const cells = within(row as HTMLElement).getAllByRole('cell');
      return cells[cells.length - 1];
    };
    // Flow 3 (index 2): bbr, switched automatically; 2 of 1002 segments retransmitted.
    expect(cellOf(3)).toHaveTextContent(/^bbrauto0\.20 %$/);
    expect(cellOf(3)).toHaveAttribute('title', expect.stringContaining('switched by the gateway: to hybla on a DAMA/BoD link'));
    expect(cellOf(1)).toHaveTextContent(/^hybla_lddefault0\.00 %$/);
    // A gateway that does not report it: a dash, said so.
    expect(cellOf(7)).toHaveTextContent('—');
    expect(cellOf(7)).toHaveAttribute('title', 'not reported by this gateway');
  });

  it('sorts by the satellite leg\'s retransmissions, unreported last', () => {
    const sorted = filterAndSortFlows(makeFlows(14), { search: '', action: null, state: null, sort: 'sat', dir: 'desc' });
    expect(sorted[0].id).toBe(13); // 12 of 1012 retransmitted
    expect(sorted.slice(-2).map((f) => f.satellite)).toEqual([null, null]);
  });

  it('offers the flow states of the gateway\'s schema', async () => {
    const user = userEvent.setup();
    renderWithProviders(<FlowsTable flows={makeFlows(3)} height={10 * ROW_HEIGHT} />);
    await user.click(screen.getByRole('textbox', { name: 'State' }));
    expect((await screen.findAllByRole('option', { hidden: true })).map((o) => o.textContent).slice(-4)).toEqual(['connecting', 'established', 'half_closed', 'closed']);
  });

  it('shows an empty state with no flows', () => {
    renderWithProviders(<FlowsTable flows={[]} />);
    expect(screen.getByText(/No flows yet/)).toBeInTheDocument();
  });

  it('sorts numerically descending by rate by default', () => {
    const sorted = filterAndSortFlows(makeFlows(50), { search: '', action: null, state: null, sort: 'rate', dir: 'desc' });
    for (let i = 1; i < sorted.length; i++) expect(sorted[i - 1].rate_down_bps).toBeGreaterThanOrEqual(sorted[i].rate_down_bps);
  });
});
