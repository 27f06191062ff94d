"""Benchmark (not a test): live-flow listing latency and closed-flow ingestion rate.

    .venv/bin/python -m bench.api.flows [--flows 10000] [--requests 200] [--ingest-seconds 10]

1. GET /api/v1/flows with 10,000 live flows, through uvicorn on a Unix socket (Bearer token):
   p50/p99 latency, first for the unfiltered answer (encoded once per collector tick), then filtered.
2. Ingestion: collector ticks with 1,000 closed flows waiting in the fake gateway's ring each second
   (full path: HTTP collect over the socket, SQLite insert, commit): per-tick time and records/s,
   while a second client polls as the dashboard does (live flows, the newest history page and the
   throughput series, once a second): its latencies show the reads are not starved by the writes.
Prints a JSON summary on the last line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import uvicorn

from bench.api import seed
from perigee_api.core import security
from perigee_api.core.config import Settings
from perigee_api.main import create_app
from perigee_fakes.fake_gateway import FakeGateway, make_flow

TOKEN = security.TOKEN_PREFIX + "bench-token-0123456789abcdef"


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


# Times GET /api/v1/flows `n` times on one keep-alive connection; prints [latencies_ms, body_bytes].
LIST_CLIENT = """
import json, sys, time
import httpx
sock, token, params, n = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
c = httpx.Client(transport=httpx.HTTPTransport(uds=sock), base_url="http://api",
                 headers={"Authorization": "Bearer " + token}, timeout=30)
c.get("/api/v1/flows", params=params)  # warm-up: connection, and the snapshot's first encoding
lat, size = [], 0
for _ in range(n):
    t = time.perf_counter()
    r = c.get("/api/v1/flows", params=params)
    lat.append((time.perf_counter() - t) * 1000)
    assert r.status_code == 200, r.text[:300]
    size = len(r.content)
print(json.dumps([lat, size]))
"""


class DashboardPoller:
    """What an open dashboard asks for each second, on its own connection and thread."""

    PATHS: tuple[tuple[str, dict[str, str]], ...] = (
        ("/api/v1/flows", {}),
        ("/api/v1/flows/history", {"limit": "50"}),
        ("/api/v1/stats/series", {"metric": "action_bps"}),
    )

    def __init__(self, api_sock: Path) -> None:
        self.client = httpx.Client(
            transport=httpx.HTTPTransport(uds=str(api_sock)),
            base_url="http://api",
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=30,
        )
        self.latencies_ms: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> list[float]:
        self._stop.set()
        self._thread.join(timeout=30)
        self.client.close()
        assert not self.failures, self.failures[:3]
        assert self.latencies_ms, "the poller made no request"
        return self.latencies_ms

    def _run(self) -> None:
        while not self._stop.is_set():
            for path, params in self.PATHS:
                t = time.perf_counter()
                r = self.client.get(path, params=params)
                self.latencies_ms.append((time.perf_counter() - t) * 1000)
                if r.status_code != 200:
                    self.failures.append(f"{path}: {r.status_code} {r.text[:200]}")
            self._stop.wait(1.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--flows", type=int, default=10_000)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--ingest-seconds", type=int, default=10)
    ap.add_argument("--ingest-rate", type=int, default=1000)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="pgb", dir="/tmp"))
    gw = FakeGateway(tmp / "gw.sock").start()
    settings = Settings(data_dir=tmp / "data", gateway_socket=gw.socket_path, collector_enabled=False)
    app = create_app(settings)
    ctx = app.state.ctx
    with ctx.db.session() as db:
        seed.read_token(db, TOKEN)

    now = time.time()
    gw.live_flows = [
        make_flow(
            i,
            cls=("web", "bulk", "video")[i % 3],
            action=("accelerate", "cache", "bypass")[i % 3],
            client=f"10.71.1.{10 + i % 2}:{20000 + i % 40000}",
            now=now,
        )
        for i in range(args.flows)
    ]
    ctx.collector.tick()

    api_sock = tmp / "api.sock"
    server = uvicorn.Server(uvicorn.Config(app, uds=str(api_sock), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    client = httpx.Client(
        transport=httpx.HTTPTransport(uds=str(api_sock)),
        base_url="http://api",
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=30,
    )

    def measure(params: dict[str, str]) -> dict[str, float]:
        # The client runs in its own process, as a browser would: in this one it would share the
        # GIL with the server thread and the timings would measure that contention too.
        out = subprocess.run(  # noqa: S603  (our interpreter, our script, no shell)
            [sys.executable, "-c", LIST_CLIENT, str(api_sock), TOKEN, json.dumps(params), str(args.requests)],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        lat, size = json.loads(out.stdout)
        return {
            "p50_ms": round(statistics.median(lat), 2),
            "p99_ms": round(pct(lat, 99), 2),
            "max_ms": round(max(lat), 2),
            "bytes": size,
        }

    count = client.get("/api/v1/flows").json()["count"]
    assert count == args.flows, count
    listing = {"flows": count, "unfiltered": measure({}), "filtered_action": measure({"action": "cache"})}
    print(f"list {count} live flows: {json.dumps(listing)}")

    # Ingestion: the full collector path, one tick per second's worth of closed flows, paced at
    # one tick a second like the real collector, while the dashboard's reads go on beside it.
    gw.live_flows = []
    tick_ms = []
    seq = 10_000_000
    poller = DashboardPoller(api_sock)
    poller.start()
    for _ in range(args.ingest_seconds):
        started = time.perf_counter()
        gw.closed_ring = [make_flow(seq + j, state="closed", now=time.time()) for j in range(args.ingest_rate)]
        seq += args.ingest_rate
        t = time.perf_counter()
        ctx.collector.tick()
        tick_ms.append((time.perf_counter() - t) * 1000)
        time.sleep(max(0.0, 1.0 - (time.perf_counter() - started)))
    poll_ms = poller.stop()
    stored = client.get("/api/v1/flows/history", params={"limit": 1}).json()["total"]
    assert stored == args.ingest_rate * args.ingest_seconds, stored
    ingest = {
        "records_per_tick": args.ingest_rate,
        "tick_p50_ms": round(statistics.median(tick_ms), 1),
        "tick_max_ms": round(max(tick_ms), 1),
        "sustainable_records_per_s": int(args.ingest_rate / (statistics.median(tick_ms) / 1000)),
        "stored": stored,
        "poll_requests": len(poll_ms),
        "poll_p99_ms": round(pct(poll_ms, 99), 2),
    }
    print(f"ingest: {json.dumps(ingest)}")

    client.close()
    server.should_exit = True
    thread.join(timeout=5)
    gw.stop()
    ctx.db.dispose()
    shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps({"list_live_flows": listing, "ingest_closed_flows": ingest}))


if __name__ == "__main__":
    main()
