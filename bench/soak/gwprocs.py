"""A gateway's process tree (master, workers, Squid, unbound): pids by role, open fds and RSS."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


def read_pid(pidfile: str) -> int | None:
    try:
        return int(Path(pidfile).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def descendants(pid: int) -> list[int]:
    kids = _children()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def cmdline(pid: int) -> list[str]:
    try:
        return [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        return []


def workers(master: int) -> list[int]:
    return [p for p in _children().get(master, []) if "worker" in cmdline(p)]


def squid_master(master: int) -> int | None:
    """Squid's own top process (started by the daemon with -N)."""
    for p in _children().get(master, []):
        argv = cmdline(p)
        if argv and os.path.basename(argv[0]).startswith("squid"):
            return p
    return None


@dataclass(frozen=True)
class Footprint:
    processes: int
    fds: int
    rss_kib: int
    squid_rss_kib: int = 0  # the part of rss_kib in Squid's processes (its memory store fills with use)


def footprint(master: int | None) -> Footprint:
    if master is None:
        return Footprint(0, 0, 0)
    procs = fds = rss = squid_rss = 0
    for p in descendants(master):
        try:
            fds += len(os.listdir(f"/proc/{p}/fd"))
            kib = 0
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    kib = int(line.split()[1])
            argv = cmdline(p)
            # Squid's kids name themselves "(squid-1)", "(squid-coord-2)", ...
            if argv and "squid" in os.path.basename(argv[0]):
                squid_rss += kib
            rss += kib
            procs += 1
        except OSError:
            continue
    return Footprint(procs, fds, rss, squid_rss)
