"""Mixed traffic from one namespace for a fixed time: bulk downloads and uploads against the bulk
server (TCP 5001), many small flows (a short GET on a new connection each), and HTTP GETs of one
cacheable object on port 80 at given times (the first a cache miss, later ones hits when a cache
is on the path). `satlab.clients mix` runs it and prints one JSON line of what it did.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from .bulk import PORT as BULK_PORT

CHUNK = 256 * 1024


@dataclass
class MixPlan:
    server: str
    duration_s: float
    downloads: int = 2
    uploads: int = 1
    bulk_bytes: int = 500_000_000  # per transfer: longer than any run, so each runs to the end
    small_per_s: float = 10.0
    small_bytes: int = 20_000
    http_bytes: int = 20_000_000
    http_at_s: list[float] = field(default_factory=lambda: [2.0, 16.0])


@dataclass
class MixResult:
    small_flows: int = 0
    small_failed: int = 0
    bulk_bytes_down: int = 0
    bulk_bytes_up: int = 0
    http: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"small_flows": self.small_flows, "small_failed": self.small_failed,
                "bulk_bytes_down": self.bulk_bytes_down, "bulk_bytes_up": self.bulk_bytes_up,
                "http": self.http}


async def _download(plan: MixPlan, res: MixResult, stop: float) -> None:
    while time.monotonic() < stop:
        try:
            r, w = await asyncio.open_connection(plan.server, BULK_PORT)
            w.write(f"GET {plan.bulk_bytes}\n".encode())
            await w.drain()
            while time.monotonic() < stop:
                data = await r.read(CHUNK)
                if not data:
                    break
                res.bulk_bytes_down += len(data)
            w.close()
        except OSError:
            await asyncio.sleep(0.2)


async def _upload(plan: MixPlan, res: MixResult, stop: float) -> None:
    block = bytes(CHUNK)
    while time.monotonic() < stop:
        try:
            _, w = await asyncio.open_connection(plan.server, BULK_PORT)
            w.write(f"PUT {plan.bulk_bytes}\n".encode())
            sent = 0
            while time.monotonic() < stop and sent < plan.bulk_bytes:
                w.write(block)
                await w.drain()
                sent += len(block)
                res.bulk_bytes_up += len(block)
            w.close()
        except OSError:
            await asyncio.sleep(0.2)


async def _small(plan: MixPlan, res: MixResult) -> None:
    try:
        r, w = await asyncio.open_connection(plan.server, BULK_PORT)
        w.write(f"GET {plan.small_bytes}\n".encode())
        await w.drain()
        got = 0
        while got < plan.small_bytes:
            data = await r.read(CHUNK)
            if not data:
                break
            got += len(data)
        w.close()
        if got == plan.small_bytes:
            res.small_flows += 1
        else:
            res.small_failed += 1
    except OSError:
        res.small_failed += 1


async def _small_flows(plan: MixPlan, res: MixResult, stop: float) -> None:
    tasks: set[asyncio.Task[None]] = set()
    period = 1.0 / plan.small_per_s
    nxt = time.monotonic()
    while nxt < stop:
        t = asyncio.create_task(_small(plan, res))
        tasks.add(t)
        t.add_done_callback(tasks.discard)
        nxt += period
        await asyncio.sleep(max(0.0, nxt - time.monotonic()))
    if tasks:
        await asyncio.wait(tasks, timeout=10)


async def _http_get(plan: MixPlan, res: MixResult, at: float, start: float) -> None:
    await asyncio.sleep(max(0.0, start + at - time.monotonic()))
    t0 = time.monotonic()
    rec: dict[str, Any] = {"at_s": at, "bytes": 0}
    try:
        r, w = await asyncio.open_connection(plan.server, 80)
        w.write(f"GET /bytes/{plan.http_bytes} HTTP/1.1\r\nHost: {plan.server}\r\nConnection: close\r\n\r\n"
                .encode())
        await w.drain()
        while True:
            data = await r.read(CHUNK)
            if not data:
                break
            rec["bytes"] += len(data)
        w.close()
    except OSError as e:
        rec["error"] = str(e)
    rec["duration_s"] = round(time.monotonic() - t0, 3)
    res.http.append(rec)


async def run(plan: MixPlan) -> MixResult:
    res = MixResult()
    start = time.monotonic()
    stop = start + plan.duration_s
    jobs = [_download(plan, res, stop) for _ in range(plan.downloads)]
    jobs += [_upload(plan, res, stop) for _ in range(plan.uploads)]
    jobs.append(_small_flows(plan, res, stop))
    jobs += [_http_get(plan, res, at, start) for at in plan.http_at_s if at < plan.duration_s]
    await asyncio.gather(*jobs)
    return res
