"""Run independent jobs on several satlab labs at once, each lab under its own namespace prefix.

Slow links (T1, Skyplex, 384 kbit/s–8 Mbit/s) cost the emulator and the endpoints almost no CPU, so
a scenario can measure 3–4 of them side by side instead of one after another. A job receives the
prefix of the lane it runs on and brings its own lab up and down with `bench.lab.running(...,
prefix=...)`; lanes never share a lab. Fast links (50 Mbit/s) should stay on one lane.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from bench import lab

T = TypeVar("T")


def lane_prefixes(count: int, base: str | None = None) -> list[str]:
    """`bn-` → `bn1-`, `bn2-`, ...: distinct from the serial prefix and from each other."""
    stem = (base if base is not None else lab.PREFIX).rstrip("-")
    return [f"{stem}{i}-" for i in range(1, count + 1)]


def run_parallel(jobs: Sequence[Callable[[str], T]], lanes: int, base: str | None = None) -> list[T | BaseException]:
    """Each job's result (or the exception it raised), in the order of `jobs`.

    At most `lanes` jobs run at once; a lane's prefix is handed to one job at a time. Every lane
    prefix is taken down at the end, even if a job died without cleaning up.
    """
    prefixes = lane_prefixes(max(1, min(lanes, len(jobs) or 1)), base)
    free: queue.Queue[str] = queue.Queue()
    for p in prefixes:
        free.put(p)

    def on_lane(job: Callable[[str], T]) -> T | BaseException:
        prefix = free.get()
        try:
            return job(prefix)
        except Exception as exc:  # noqa: BLE001  (one failed job must not lose the others)
            return exc
        finally:
            free.put(prefix)

    try:
        with ThreadPoolExecutor(max_workers=len(prefixes)) as pool:
            return list(pool.map(on_lane, jobs))
    finally:
        for p in prefixes:
            lab.down(p)


def longest_first(items: Sequence[T], expected_s: Callable[[T], float]) -> list[T]:
    """Start the longest jobs first so the lanes finish close together."""
    return sorted(items, key=expected_s, reverse=True)


def makespan(durations: Sequence[float], lanes: int, setup_s: float = 0.0) -> float:
    """Wall time of running these jobs longest first on `lanes` lanes (each job + its lab setup).

    Greedy list scheduling, as run_parallel does it: a job starts on the first lane to come free.
    """
    ends = [0.0] * max(1, lanes)
    for d in sorted(durations, reverse=True):
        i = ends.index(min(ends))
        ends[i] += d + setup_s
    return max(ends)
