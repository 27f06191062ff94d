import { describe, expect, it } from 'vitest';
import { hostView, type Host } from './host';

const base: Host = {
  cpus: 2, cpu_busy_seconds: 10, cpu_idle_seconds: 90, load_1m: 0.5, load_5m: 0.4, load_15m: 0.3,
  memory_total_bytes: 4000, memory_available_bytes: 1000,
  disks: [{ path: '/', total_bytes: 100, available_bytes: 25 }],
  interfaces: [{ name: 'sat0', rx_bytes: 1000, tx_bytes: 0, rx_packets: 0, tx_packets: 0, rx_errors: 1, tx_errors: 0, rx_dropped: 2, tx_dropped: 3 }],
};

describe('hostView', () => {
  it('turns two readings into CPU share and interface rates', () => {
    const now: Host = { ...base, cpu_busy_seconds: 13, cpu_idle_seconds: 97, interfaces: [{ ...base.interfaces[0], rx_bytes: 6000, tx_bytes: 500 }] };
    const v = hostView(now, base, 5);
    expect(v.cpuBusy).toBeCloseTo(0.3);
    expect(v.interfaces[0]).toEqual({ name: 'sat0', rxBps: 8000, txBps: 800, errors: 1, dropped: 5 });
    expect(v.memoryUsed).toBe(3000);
    expect(v.disks).toEqual([{ path: '/', used: 75, total: 100 }]);
  });

  it('knows no rate from one reading or a counter that went back', () => {
    expect(hostView(base, null, 5).cpuBusy).toBeNull();
    expect(hostView(base, null, 5).interfaces[0].rxBps).toBeNull();
    const reset: Host = { ...base, interfaces: [{ ...base.interfaces[0], rx_bytes: 10 }] };
    expect(hostView(reset, base, 5).interfaces[0].rxBps).toBeNull();
  });
});
