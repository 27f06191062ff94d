"""CPU time of a process from /proc/<pid>/stat (utime + stime, in clock ticks)."""

from __future__ import annotations

import os
import time


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
