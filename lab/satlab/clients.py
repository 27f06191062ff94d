"""Client tools run inside a namespace: `python -m satlab.clients fetch|bulk|udp-send|udp-recv ...`.
`satlab fetch NS ...` etc. re-exec this module through `ip netns exec`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from . import bulk, httpclient, mix, udpgen
from .topology import SERVER_V4
from .units import fmt_rate, parse_rate, parse_size


def _print(result: dict[str, Any], as_json: bool, keys: tuple[str, ...]) -> None:
    if as_json:
        print(json.dumps(result))
        return
    for k in keys:
        if k in result:
            v = result[k]
            print(f"{k:12} {fmt_rate(v) if k.endswith('_bps') else v}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="satlab.clients")
    sub = ap.add_subparsers(dest="tool", required=True)
    f = sub.add_parser("fetch", help="GET a URL; report bytes, duration, goodput, sha256")
    f.add_argument("url")
    f.add_argument("--out", help="write the body to this file")
    f.add_argument("--header", action="append", default=[], help="extra request header 'Name: value'")
    f.add_argument("--json", action="store_true")
    b = sub.add_parser("bulk", help="bulk GET/PUT against a satlab bulk server (TCP 5001)")
    b.add_argument("op", choices=("get", "put"))
    b.add_argument("size", type=parse_size)
    b.add_argument("--server", default=SERVER_V4)
    b.add_argument("--port", type=int, default=bulk.PORT)
    b.add_argument("--json", action="store_true")
    s = sub.add_parser("udp-send", help="paced UDP source (rate counts Ethernet frames)")
    s.add_argument("--to", required=True)
    s.add_argument("--port", type=int, default=9000)
    s.add_argument("--rate", type=parse_rate, required=True)
    s.add_argument("--size", type=int, default=1000, help="UDP payload bytes")
    s.add_argument("--duration", type=float, required=True)
    r = sub.add_parser("udp-recv", help="UDP sink: counts datagrams, prints one JSON line")
    r.add_argument("--port", type=int, default=9000)
    r.add_argument("--timeout", type=float, default=30.0)
    r.add_argument("--idle", type=float, default=3.0)
    r.add_argument("--expect", type=int)
    r.add_argument("--arrivals", action="store_true", help="include every arrival (time, size)")
    m = sub.add_parser("mix", help="mixed traffic for a while: bulk down/up, small flows, HTTP GETs on port 80")
    m.add_argument("--server", default=SERVER_V4)
    m.add_argument("--duration", type=float, required=True, metavar="S")
    m.add_argument("--downloads", type=int, default=2)
    m.add_argument("--uploads", type=int, default=1)
    m.add_argument("--small-per-s", type=float, default=10.0)
    m.add_argument("--small-size", type=parse_size, default=20_000)
    m.add_argument("--http-size", type=parse_size, default=20_000_000)
    m.add_argument("--http-at", type=float, action="append", metavar="S",
                   help="seconds after the start of each GET of the one object (default 2 and 16)")
    a = ap.parse_args(argv)
    try:
        if a.tool == "fetch":
            hdrs = dict(h.split(":", 1) for h in a.header)
            hdrs = {k.strip(): v.strip() for k, v in hdrs.items()}
            if a.out:
                with open(a.out, "wb") as out:
                    res = httpclient.fetch(a.url, out, headers=hdrs)
            else:
                res = httpclient.fetch(a.url, headers=hdrs)
            _print(res, a.json, ("url", "status", "bytes", "duration_s", "ttfb_s", "goodput_bps", "sha256"))
            return 0 if res["status"] < 400 else 1
        if a.tool == "bulk":
            res = bulk.client(a.op, a.size, a.server, a.port)
            _print(res, a.json, ("op", "server", "bytes", "duration_s", "goodput_bps", "sha256", "complete"))
            return 0 if res["complete"] else 1
        if a.tool == "mix":
            plan = mix.MixPlan(server=a.server, duration_s=a.duration, downloads=a.downloads, uploads=a.uploads,
                               small_per_s=a.small_per_s, small_bytes=a.small_size, http_bytes=a.http_size,
                               http_at_s=a.http_at or [2.0, 16.0])
            print(json.dumps(asyncio.run(mix.run(plan)).to_json()))
            return 0
        if a.tool == "udp-send":
            print(json.dumps(udpgen.send(a.to, a.port, a.rate, a.size, a.duration)))
            return 0
        res = udpgen.receive(a.port, timeout=a.timeout, idle=a.idle, expect=a.expect)
        if not a.arrivals:
            res.pop("arrivals", None)
        print(json.dumps(res))
        return 0
    except (OSError, ValueError) as e:
        print(f"satlab {a.tool}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
