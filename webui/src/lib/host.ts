// The box's figures as GET /v1/health reports them (cumulative counters), turned into what an operator reads:
// CPU busy share and interface rates over the interval between two readings, memory and disk use now.
import type { GatewayHealth } from '../api/endpoints';

export type Host = GatewayHealth['host'];

export interface InterfaceRates {
  name: string;
  rxBps: number | null;
  txBps: number | null;
  /** Errors and drops since the interface came up. */
  errors: number;
  dropped: number;
}

export interface HostView {
  /** Busy share of all CPUs over the interval; null until two readings. */
  cpuBusy: number | null;
  cpus: number;
  load: [number, number, number];
  memoryUsed: number;
  memoryTotal: number;
  disks: { path: string; used: number; total: number }[];
  interfaces: InterfaceRates[];
}

/** `prev` and `now` are two readings `seconds` apart (the same gateway); a counter that went back reads as unknown. */
export function hostView(now: Host, prev: Host | null, seconds: number): HostView {
  const rate = (a: number, b: number | undefined) => (b === undefined || seconds <= 0 || a < b ? null : ((a - b) * 8) / seconds);
  let cpuBusy: number | null = null;
  if (prev) {
    const busy = now.cpu_busy_seconds - prev.cpu_busy_seconds;
    const idle = now.cpu_idle_seconds - prev.cpu_idle_seconds;
    if (busy >= 0 && idle >= 0 && busy + idle > 0) cpuBusy = busy / (busy + idle);
  }
  const before = new Map((prev?.interfaces ?? []).map((i) => [i.name, i]));
  return {
    cpuBusy,
    cpus: now.cpus,
    load: [now.load_1m, now.load_5m, now.load_15m],
    memoryUsed: now.memory_total_bytes - now.memory_available_bytes,
    memoryTotal: now.memory_total_bytes,
    disks: now.disks.map((d) => ({ path: d.path, used: d.total_bytes - d.available_bytes, total: d.total_bytes })),
    interfaces: now.interfaces.map((i) => ({
      name: i.name,
      rxBps: rate(i.rx_bytes, before.get(i.name)?.rx_bytes),
      txBps: rate(i.tx_bytes, before.get(i.name)?.tx_bytes),
      errors: i.rx_errors + i.tx_errors,
      dropped: i.rx_dropped + i.tx_dropped,
    })),
  };
}
