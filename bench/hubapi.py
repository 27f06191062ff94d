"""The API's terminals page against real hub gateways, for the `hub-scale` benchmark (not a test).

    python -m bench.hubapi --socket <hub gateway control socket> [--requests 30]

`HubApi` starts the API (perigee_api, a fresh data dir: it imports the local gateway's running config, with its
enrolled terminals, as its first version) on a Unix socket with a read token, as bench/api/flows.py does;
`register` makes another hub gateway a fleet member (its TLS credentials, for satlab's `members.enroll`);
`reimport` takes the local gateway's running config again (after the terminals were enrolled); `time_page` times
GET /api/v1/peer/terminals: the enrolled terminals (desired config) with every fleet gateway's view of each
(GET /v1/peer, asked of each on every request). The command line prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from bench.api import seed
from bench.hubstats import pct
from perigee_api.core import security
from perigee_api.core.config import Settings
from perigee_api.main import create_app
from perigee_api.services import fleet, fleet_pki, running

TOKEN = security.TOKEN_PREFIX + "hub-scale-token-0123456789abcdef"
PAGE = "/api/v1/peer/terminals"
METRICS_PORT = 9464


class HubApi:
    def __init__(self, socket: str) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="pghs", dir="/tmp"))
        settings = Settings(data_dir=self.tmp / "data", gateway_socket=Path(socket), collector_enabled=False)
        self.app = create_app(settings)
        self.ctx = self.app.state.ctx
        with self.ctx.db.session() as db:
            seed.read_token(db, TOKEN)
        self.sock = self.tmp / "api.sock"
        self.server = uvicorn.Server(uvicorn.Config(self.app, uds=str(self.sock), log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=lambda: asyncio.run(self.server.serve()), daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)

    def register(self, name: str, address: str) -> dict[str, str]:
        """Register a gateway of the fleet; its credentials (ca_pem, cert_pem, key_pem)."""
        with self.ctx.db.session() as db:
            _, pair = fleet.register(self.ctx, db, name, address, METRICS_PORT, "admin")
            db.commit()
        ca = fleet_pki.ca_pem(self.ctx.settings.data_dir)
        return {"ca_pem": ca, "cert_pem": pair.cert_pem, "key_pem": pair.key_pem}

    def reimport(self) -> None:
        """The local gateway's running config becomes the desired (and active) version."""
        with self.ctx.db.session() as db:
            running.reconcile(db, self.ctx.gateway)
            db.commit()

    def time_page(self, requests: int) -> dict[str, Any]:
        c = httpx.Client(
            transport=httpx.HTTPTransport(uds=str(self.sock)),
            base_url="http://api",
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=60,
        )
        first = c.get(PAGE)  # warm-up (connection, first queries)
        if first.status_code != 200:
            raise RuntimeError(f"{PAGE}: {first.status_code} {first.text[:300]}")
        lat: list[float] = []
        body: dict[str, Any] = {}
        size = 0
        for _ in range(requests):
            t = time.perf_counter()
            r = c.get(PAGE)
            lat.append((time.perf_counter() - t) * 1000)
            size = len(r.content)
            body = r.json()
        rows = body.get("terminals") if isinstance(body.get("terminals"), list) else []
        assert isinstance(rows, list)
        gateways = sorted({g["gateway"] for t in rows for g in t.get("gateways", [])})
        return {
            "latency_ms": lat,
            "p50_ms": pct(lat, 50),
            "p99_ms": pct(lat, 99),
            "terminals": len(rows),
            "connected": sum(1 for t in rows if t.get("connected")),
            "gateways": gateways,
            "bytes": size,
            "errors": body.get("errors"),
        }

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        shutil.rmtree(self.tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.hubapi")
    ap.add_argument("--socket", required=True)
    ap.add_argument("--requests", type=int, default=30)
    a = ap.parse_args(argv)
    api = HubApi(a.socket)
    try:
        print(json.dumps(api.time_page(a.requests)))
    finally:
        api.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
