"""The gateway daemon as a set of processes: find master and workers in a namespace, read their
RSS, peak RSS, open fds and CPU time from /proc, and ask its control socket for counters.

Used by the overhead and scale scenarios; the parsers are pure so they are unit-tested.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from bench import procs
from bench.tools import cpu


def classify_cmdline(raw: bytes) -> str | None:
    """'master' for `perigee gateway run`, 'worker' for `perigee gateway worker`, else None."""
    argv = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    if not argv or not os.path.basename(argv[0]).startswith("perigee"):
        return None
    for i, arg in enumerate(argv[1:-1], start=1):
        if arg == "gateway":
            return {"run": "master", "worker": "worker"}.get(argv[i + 1])
    return None


def parse_status_kib(text: str) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) from /proc/<pid>/status, in KiB."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(rest.split()[0])
    return out


@dataclass(frozen=True)
class Daemon:
    master: list[int]
    workers: list[int]

    @property
    def pids(self) -> list[int]:
        return self.master + self.workers


def find(ns: str) -> Daemon:
    """The gateway processes living in network namespace `ns`."""
    out = procs.run(["ip", "netns", "pids", ns], timeout=10, check=False).stdout
    master, workers = [], []
    for pid in sorted(int(p) for p in out.split()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                kind = classify_cmdline(f.read())
        except OSError:
            continue
        if kind == "master":
            master.append(pid)
        elif kind == "worker":
            workers.append(pid)
    return Daemon(master, workers)


@dataclass
class Snapshot:
    rss_kib: dict[int, int] = field(default_factory=dict)
    hwm_kib: dict[int, int] = field(default_factory=dict)
    fds: dict[int, int] = field(default_factory=dict)
    cpu_ticks: int = 0

    @property
    def rss_total_kib(self) -> int:
        return sum(self.rss_kib.values())


def snapshot(pids: list[int]) -> Snapshot:
    """RSS, peak RSS, fd count per process and their summed utime+stime; vanished pids are left out."""
    snap = Snapshot()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                mem = parse_status_kib(f.read())
            snap.fds[pid] = len(os.listdir(f"/proc/{pid}/fd"))
            snap.cpu_ticks += cpu.cpu_ticks(pid)
        except OSError:
            continue
        snap.rss_kib[pid] = mem.get("VmRSS", 0)
        snap.hwm_kib[pid] = mem.get("VmHWM", 0)
    return snap
