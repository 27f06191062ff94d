import { Badge, Group, Select, Text, TextInput, UnstyledButton } from '@mantine/core';
import { useVirtualizer } from '@tanstack/react-virtual';
import { useMemo, useRef, useState } from 'react';
import { Link } from 'react-router-dom';
import { formatBps, formatBytes, formatMs } from '../lib/format';
import type { ClassAction, Flow } from '../api/endpoints';
import { CC_REASON, formatRetransmit, legsOf, PATH_CHOICES, PATH_LABEL, pathOf, RELAY_LABEL, satelliteBytes } from '../lib/flows';
import classes from './FlowsTable.module.css';
import { choices, reportChoices } from '../lib/system-config';

export type SortKey = 'id' | 'client' | 'server' | 'site' | 'class' | 'action' | 'path' | 'state' | 'bytes' | 'rate' | 'rtt' | 'sat';
type SortDir = 'asc' | 'desc';

const COLUMNS: { key: SortKey; label: string }[] = [
  { key: 'id', label: 'ID' },
  { key: 'client', label: 'Client' },
  { key: 'server', label: 'Server' },
  { key: 'site', label: 'Site' },
  { key: 'class', label: 'Class' },
  { key: 'action', label: 'Action' },
  { key: 'path', label: 'Path' },
  { key: 'state', label: 'State' },
  { key: 'bytes', label: 'Satellite ↓/↑' },
  { key: 'rate', label: 'Rate ↓' },
  { key: 'rtt', label: 'Sat RTT' },
  { key: 'sat', label: 'Sat CC · retx' },
];

export const ROW_HEIGHT = 36;

function sortValue(f: Flow, key: SortKey): number | string {
  switch (key) {
    case 'bytes': {
      const sat = satelliteBytes(f);
      return sat ? sat.down + sat.up : f.bytes_down + f.bytes_up;
    }
    case 'rate':
      return f.rate_down_bps;
    case 'rtt':
      return legsOf(f).satellite?.srtt_us ?? -1;
    case 'sat':
      return f.satellite ? f.satellite.retransmit_pct : -1;
    case 'id':
      return f.id;
    case 'path':
      return pathOf(f);
    case 'site':
      return f.site ?? '';
    default:
      return String(f[key] ?? '');
  }
}

export function filterAndSortFlows(
  flows: Flow[],
  opts: { search: string; action: string | null; state: string | null; path?: string | null; sort: SortKey; dir: SortDir },
): Flow[] {
  const q = opts.search.trim().toLowerCase();
  const out = flows.filter(
    (f) =>
      (!opts.action || f.action === opts.action) &&
      (!opts.path || pathOf(f) === opts.path) &&
      (!opts.state || f.state === opts.state) &&
      (!q ||
        f.client.toLowerCase().includes(q) ||
        f.server.toLowerCase().includes(q) ||
        f.class.toLowerCase().includes(q) ||
        (f.site ?? '').toLowerCase().includes(q) ||
        String(f.id) === q),
  );
  const sign = opts.dir === 'asc' ? 1 : -1;
  out.sort((a, b) => {
    const va = sortValue(a, opts.sort);
    const vb = sortValue(b, opts.sort);
    if (va < vb) return -sign;
    if (va > vb) return sign;
    return a.id - b.id;
  });
  return out;
}

const ACTION_COLOR: Record<ClassAction, string> = { accelerate: 'indigo', cache: 'teal', bypass: 'gray' };
const PATH_COLOR: Record<string, string> = { direct: 'gray', peer: 'violet' };

/** The satellite leg: its congestion control, a badge for why it runs it, the share it retransmitted. */
function SatLegCell({ leg }: { leg: Flow['satellite'] }) {
  if (!leg) {
    return (
      <div role="cell" className={classes.cell} title="not reported by this gateway">
        —
      </div>
    );
  }
  const why = CC_REASON[leg.cc_reason];
  const retx = formatRetransmit(leg.retransmit_pct, leg.segments_sent);
  return (
    <div
      role="cell"
      className={`${classes.cell} ${classes.satLeg}`}
      title={`${leg.cc}: ${why.means}; ${leg.segments_retransmitted.toLocaleString()} of ${leg.segments_sent.toLocaleString()} segments retransmitted`}
    >
      <span className={classes.cc}>{leg.cc}</span>
      <Badge size="xs" variant="light" color={why.color} className={classes.reason}>
        {why.badge}
      </Badge>
      <span className={classes.retx}>{retx}</span>
    </div>
  );
}

export function FlowsTable({ flows, height = 560 }: { flows: Flow[]; height?: number }) {
  const [search, setSearch] = useState('');
  const [action, setAction] = useState<string | null>(null);
  const [state, setState] = useState<string | null>(null);
  const [path, setPath] = useState<string | null>(null);
  const [sort, setSort] = useState<SortKey>('rate');
  const [dir, setDir] = useState<SortDir>('desc');
  const rows = useMemo(
    () => filterAndSortFlows(flows, { search, action, state, path, sort, dir }),
    [flows, search, action, state, path, sort, dir],
  );

  const scrollRef = useRef<HTMLDivElement>(null);
  const virtualizer = useVirtualizer({
    count: rows.length,
    getScrollElement: () => scrollRef.current,
    estimateSize: () => ROW_HEIGHT,
    overscan: 8,
    initialRect: { width: 1200, height },
  });

  const toggleSort = (key: SortKey) => {
    if (key === sort) setDir(dir === 'asc' ? 'desc' : 'asc');
    else {
      setSort(key);
      setDir(key === 'id' || key === 'client' || key === 'server' || key === 'site' || key === 'class' || key === 'path' ? 'asc' : 'desc');
    }
  };

  return (
    <div>
      <Group mb="sm" align="end" wrap="wrap">
        <TextInput
          label="Search"
          placeholder="address, port, site, class or id"
          value={search}
          onChange={(e) => setSearch(e.currentTarget.value)}
          style={{ flex: '1 1 220px' }}
        />
        <Select
          label="Action"
          clearable
          placeholder="any"
          data={choices('Action')}
          value={action}
          onChange={setAction}
          w={160}
        />
        <Select
          label="Path"
          clearable
          placeholder="any"
          data={PATH_CHOICES}
          value={path}
          onChange={setPath}
          w={140}
        />
        <Select
          label="State"
          clearable
          placeholder="any"
          data={reportChoices('FlowState')}
          value={state}
          onChange={setState}
          w={160}
        />
        <Text size="sm" c="dimmed" aria-live="polite" data-testid="flow-count">
          {rows.length.toLocaleString()} of {flows.length.toLocaleString()} flows
        </Text>
      </Group>
      <div role="table" aria-label="Flows" aria-rowcount={rows.length + 1} className={classes.table}>
        <div role="rowgroup">
          <div role="row" className={`${classes.row} ${classes.header}`} aria-rowindex={1}>
            {COLUMNS.map((c) => (
              <div
                role="columnheader"
                key={c.key}
                className={classes.cell}
                aria-sort={sort === c.key ? (dir === 'asc' ? 'ascending' : 'descending') : 'none'}
              >
                <UnstyledButton onClick={() => toggleSort(c.key)} className={classes.sortButton}>
                  {c.label}
                  {sort === c.key ? (dir === 'asc' ? ' ▲' : ' ▼') : ''}
                </UnstyledButton>
              </div>
            ))}
          </div>
        </div>
        <div ref={scrollRef} className={classes.scroll} style={{ height }} data-testid="flows-scroll" tabIndex={0}>
          {rows.length === 0 ? (
            <Text c="dimmed" ta="center" py="xl">
              {flows.length === 0 ? 'No flows yet: traffic through the gateway appears here live.' : 'No flow matches the filter.'}
            </Text>
          ) : (
            <div role="rowgroup" style={{ height: virtualizer.getTotalSize(), position: 'relative' }}>
              {virtualizer.getVirtualItems().map((item) => {
                const f = rows[item.index];
                const sat = legsOf(f).satellite;
                const crossed = satelliteBytes(f);
                return (
                  <div
                    role="row"
                    key={f.id}
                    aria-rowindex={item.index + 2}
                    className={classes.row}
                    style={{ transform: `translateY(${item.start}px)`, height: ROW_HEIGHT }}
                  >
                    <div role="cell" className={classes.cell}>
                      <Link to={`/flows/${f.id}`} aria-label={`Flow ${f.id} details`}>
                        {f.id}
                      </Link>
                    </div>
                    <div role="cell" className={classes.cell}>{f.client}</div>
                    <div role="cell" className={classes.cell}>{f.server}</div>
                    <div role="cell" className={classes.cell} title={f.site ?? undefined}>{f.site ?? '—'}</div>
                    <div role="cell" className={classes.cell} title={f.class}>{f.class}</div>
                    <div role="cell" className={classes.cell}>
                      <Badge size="sm" variant="light" color={ACTION_COLOR[f.action]} title={f.relay ? RELAY_LABEL[f.relay] : undefined}>
                        {f.action}
                        {f.relay === 'squid' ? ' · squid' : ''}
                      </Badge>
                    </div>
                    <div role="cell" className={classes.cell}>
                      <Badge size="sm" variant="outline" color={PATH_COLOR[pathOf(f)] ?? 'gray'}>
                        {PATH_LABEL[pathOf(f)] ?? pathOf(f)}
                      </Badge>
                    </div>
                    <div role="cell" className={classes.cell}>{f.state}</div>
                    <div
                      role="cell"
                      className={classes.cell}
                      title={`crossed the satellite; the server handed the gateway ${formatBytes(f.bytes_down)} ↓ / the client ${formatBytes(f.bytes_up)} ↑`}
                    >
                      {crossed ? `${formatBytes(crossed.down)} / ${formatBytes(crossed.up)}` : `${formatBytes(f.bytes_down)} / ${formatBytes(f.bytes_up)}`}
                      {crossed && crossed.queuedDown > 0 && (
                        <Text span size="xs" c="dimmed">
                          {' '}
                          +{formatBytes(crossed.queuedDown)} queued
                        </Text>
                      )}
                    </div>
                    <div role="cell" className={classes.cell}>{formatBps(f.rate_down_bps)}</div>
                    <div role="cell" className={classes.cell}>{formatMs(sat?.srtt_us)}</div>
                    <SatLegCell leg={f.satellite} />
                  </div>
                );
              })}
            </div>
          )}
        </div>
      </div>
    </div>
  );
}
