import { SegmentedControl } from '@mantine/core';
import { useSearchParams } from 'react-router-dom';
import { rangeOf, RANGES, type TimeRange } from '../lib/ranges';

/** The page's chart range, kept in the URL (`?range=1h`) so a link or a reload shows the same. */
export function useRange(): [TimeRange, (r: TimeRange['value']) => void] {
  const [params, setParams] = useSearchParams();
  const range = rangeOf(params.get('range'));
  const set = (value: TimeRange['value']) =>
    setParams(
      (p) => {
        const next = new URLSearchParams(p);
        next.set('range', value);
        return next;
      },
      { replace: true },
    );
  return [range, set];
}

export function RangePicker() {
  const [range, setRange] = useRange();
  return (
    <SegmentedControl
      aria-label="Time range of the charts"
      size="xs"
      value={range.value}
      onChange={(v) => setRange(v as TimeRange['value'])}
      data={RANGES.map((r) => ({ value: r.value, label: r.label }))}
    />
  );
}
