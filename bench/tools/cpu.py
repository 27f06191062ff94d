"""CPU time of a process from /proc/<pid>/stat (utime + stime, in clock ticks)."""

from __future__ import annotations

import os
import time
from collections.abc import Set as AbstractSet


def parse_stat_cpu_ticks(stat_line: str) -> int:
    """utime + stime (fields 14 and 15); the command name may contain spaces, so split after ')'."""
    fields = stat_line.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # fields[0] is field 3 (state)


def cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return parse_stat_cpu_ticks(f.read())


def cpu_percent_over(pids: list[int], seconds: float) -> float:
    """Summed CPU use of pids over a wall-clock interval, in % of one core."""
    hz = os.sysconf("SC_CLK_TCK")
    before = sum(cpu_ticks(p) for p in pids)
    t0 = time.monotonic()
    time.sleep(seconds)
    after = sum(cpu_ticks(p) for p in pids)
    return 100.0 * (after - before) / hz / (time.monotonic() - t0)


def core_busy_ticks(cpus: AbstractSet[int], stat_text: str | None = None) -> int:
    """Busy clock ticks of the given CPUs since boot, from /proc/stat's `cpuN` lines.

    Busy is user, nice, system, irq and softirq: it includes the softirq time that per-process
    utime+stime never sees (a split flow's TCP work on the gateway runs mostly there), and leaves
    out idle, iowait and steal (the hypervisor running someone else).
    """
    if stat_text is None:
        with open("/proc/stat") as f:
            stat_text = f.read()
    busy = 0
    for line in stat_text.splitlines():
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
            continue
        # user nice system idle iowait irq softirq steal
        ticks = [int(v) for v in fields[:8]]
        busy += ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6]
    return busy
