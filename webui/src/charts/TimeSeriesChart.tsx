import { useComputedColorScheme } from '@mantine/core';
import { CartesianGrid, Legend, Line, LineChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts';

export interface Series {
  key: string;
  label: string;
  color: string;
}

export interface TimeSeriesChartProps {
  /** Rows with a `t` (epoch seconds) and one number per series key. */
  data: Record<string, number | null>[];
  series: Series[];
  format: (v: number) => string;
  height?: number;
  /** Read by screen readers instead of the drawing. */
  label: string;
  /** Counts (flows, requests): the axis ticks only whole numbers, never "0, 1, 1, 2, 2". */
  integer?: boolean;
}

const timeOf = (t: number) => new Date(t * 1000).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
const dayTimeOf = (t: number) => new Date(t * 1000).toLocaleString([], { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });

/** A line chart over time. Loaded lazily: recharts stays out of the initial bundle. */
export default function TimeSeriesChart({ data, series, format, height = 220, label, integer = false }: TimeSeriesChartProps) {
  const dark = useComputedColorScheme('light') === 'dark';
  const axis = dark ? '#909296' : '#495057';
  const grid = dark ? '#373a40' : '#dee2e6';
  // Over a day or more, ticks need the date.
  const span = data.length > 1 ? Number(data[data.length - 1].t) - Number(data[0].t) : 0;
  const tick = span > 20 * 3600 ? dayTimeOf : timeOf;
  return (
    <div role="img" aria-label={label} style={{ width: '100%', height }}>
      <ResponsiveContainer width="100%" height="100%">
        <LineChart data={data} margin={{ top: 8, right: 16, bottom: 0, left: 8 }}>
          <CartesianGrid stroke={grid} strokeDasharray="3 3" />
          <XAxis dataKey="t" tickFormatter={tick} stroke={axis} fontSize={11} minTickGap={40} />
          <YAxis tickFormatter={format} stroke={axis} fontSize={11} width={96} allowDecimals={!integer} />
          <Tooltip
            labelFormatter={(t) => dayTimeOf(Number(t))}
            formatter={(v) => (typeof v === 'number' ? format(v) : String(v))}
            contentStyle={{ background: dark ? '#25262b' : '#fff', borderColor: grid }}
          />
          <Legend />
          {series.map((s) => (
            <Line key={s.key} type="monotone" dataKey={s.key} name={s.label} stroke={s.color} dot={false} isAnimationActive={false} connectNulls />
          ))}
        </LineChart>
      </ResponsiveContainer>
    </div>
  );
}
