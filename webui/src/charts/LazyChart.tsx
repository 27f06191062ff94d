import { Skeleton } from '@mantine/core';
import { lazy, Suspense } from 'react';
import type { TimeSeriesChartProps } from './TimeSeriesChart';

const TimeSeriesChart = lazy(() => import('./TimeSeriesChart'));

export function LazyTimeSeriesChart(props: TimeSeriesChartProps) {
  return (
    <Suspense fallback={<Skeleton height={props.height ?? 220} aria-label="Loading chart" />}>
      <TimeSeriesChart {...props} />
    </Suspense>
  );
}
