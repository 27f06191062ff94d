import { screen, within } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mockApi } from '../test/fetch-mock';
import { jsonResponse, renderWithProviders } from '../test/render';
import { DEFAULT_RANGE } from '../lib/ranges';
import { ALL_FLOWS, retransmitLines, SatelliteLegPanel } from './SatelliteLegPanel';

const count = (key: string, flows: number, segments: number, retrans: number) => ({
  key,
  flows,
  segments,
  retrans_segments: retrans,
  retransmit_pct: segments ? (100 * retrans) / segments : null,
});

describe('SatelliteLegPanel', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('splits the flows by congestion control and why, with what each retransmitted', async () => {
    const calls = mockApi({
      'GET /api/v1/stats/series': () => jsonResponse({ metric: 'sat_retrans_pct', resolution_s: 1, step_s: 5, start: 0, end: 10, series: [] }),
      'GET /api/v1/stats/satellite': () =>
        jsonResponse({
          live: [
            { cc: 'bbr', cc_reason: 'automatic', flows: 3 },
            { cc: 'bbr', cc_reason: 'class', flows: 1 },
            { cc: 'hybla_ld', cc_reason: 'default', flows: 12 },
          ],
          by_congestion_control: [count('bbr', 9, 2000, 10), count('hybla_ld', 40, 10_000, 250)],
          by_cc_reason: [count('default', 40, 10_000, 250), count('automatic', 6, 1500, 10), count('fallback', 0, 0, 0)],
          peer: { flows: 1234, fallbacks: 2, refused: 3, failed: 4, pool_empty: 5, redundant: { packets: 180, bytes: 245_530 } },
          updated_at: 1,
        }),
    });
    renderWithProviders(<SatelliteLegPanel range={DEFAULT_RANGE} />);
    const table = await screen.findByRole('table', { name: 'Flows by satellite congestion control' });
    const row = (cc: string) => within(table).getByRole('cell', { name: cc }).closest('tr') as HTMLElement;
    expect(row('bbr')).toHaveTextContent('3 auto1 class');
    expect(row('bbr')).toHaveTextContent('0.50 %');
    expect(row('hybla_ld')).toHaveTextContent('12 default');
    expect(row('hybla_ld')).toHaveTextContent('2.50 %');
    expect(table).toHaveTextContent('auto 6 flows, 0.67 % retransmitted');
    expect(table).toHaveTextContent('fallback 0 flows, — retransmitted');
    const peer = screen.getByRole('table', { name: 'Peer path' });
    const value = (label: string) => within(within(peer).getByRole('rowheader', { name: label }).closest('tr') as HTMLElement).getByRole('cell').textContent;
    expect(value('Flows on the peer path')).toBe('1,234');
    expect(value('Fell back to the direct path')).toBe('2');
    expect(value('Went direct, no ready connection')).toBe('5');
    expect(value('Refused by the hub')).toBe('3');
    expect(value('Reset on a failed connection')).toBe('4');
    expect(value('First bytes sent twice')).toBe('240 KiB in 180 packets');
    // The history is the API's derived series over the page's range.
    expect(calls.some((c) => c.path === '/api/v1/stats/series')).toBe(true);
  });

  it('says so when no flow reported its satellite leg', async () => {
    mockApi({
      'GET /api/v1/stats/series': () => jsonResponse({ metric: 'sat_retrans_pct', resolution_s: 1, step_s: 5, start: 0, end: 10, series: [] }),
      'GET /api/v1/stats/satellite': () => jsonResponse({ live: [], by_congestion_control: [], by_cc_reason: [], peer: null, updated_at: null }),
    });
    renderWithProviders(<SatelliteLegPanel range={DEFAULT_RANGE} />);
    expect(await screen.findByText(/No split flow has reported its satellite leg yet/)).toBeInTheDocument();
    expect(screen.getByText(/The peer path's counters arrive with the collector's first reading/)).toBeInTheDocument();
  });

  it('draws every split flow first, then each congestion control', () => {
    expect(retransmitLines(['hybla_ld', ALL_FLOWS, 'bbr']).map((l) => l.key)).toEqual([ALL_FLOWS, 'bbr', 'hybla_ld']);
  });
});
