"""Ask a DNS server for names, all at once over UDP, and report what came back.

`python -m bench.tools.dnsq --server 10.71.3.53 NAME... [--types A,AAAA,HTTPS] [--timeout 5]`
(run it inside the client namespace). Used to warm a resolver on the way (the terminal's, which
intercepts DNS from the served subnets) with exactly the queries a browser sends for a page's
names. Prints one JSON object: per query its type, rcode, answer count and time; exit 1 when a
query got no answer.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import struct
import sys
import time
from typing import Any

QTYPES = {"A": 1, "AAAA": 28, "HTTPS": 65}
RCODES = {
    0: "NOERROR",
    1: "FORMERR",
    2: "SERVFAIL",
    3: "NXDOMAIN",
    4: "NOTIMP",
    5: "REFUSED",
}


def encode_query(qid: int, name: str, qtype: int) -> bytes:
    labels = [x for x in name.rstrip(".").split(".") if x]
    if not labels or any(len(x) > 63 for x in labels):
        raise ValueError(f"bad name {name!r}")
    qname = b"".join(bytes([len(x)]) + x.encode("ascii") for x in labels) + b"\0"
    return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + qname + struct.pack(">HH", qtype, 1)


def decode_header(reply: bytes) -> tuple[int, int, int]:
    """(id, rcode, answer count) of a DNS reply."""
    if len(reply) < 12:
        raise ValueError("short DNS reply")
    qid, flags, _qd, an, _ns, _ar = struct.unpack(">HHHHHH", reply[:12])
    if not flags & 0x8000:
        raise ValueError("not a reply")
    return qid, flags & 0xF, an


def ask(server: str, names: list[str], types: list[str], timeout: float) -> dict[str, Any]:
    family = socket.AF_INET6 if ":" in server else socket.AF_INET
    pending: dict[int, dict[str, Any]] = {}
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        t0 = time.monotonic()
        for name in names:
            for qt in types:
                qid = int.from_bytes(os.urandom(2), "big")
                while qid in pending:
                    qid = (qid + 1) & 0xFFFF
                pending[qid] = {"name": name, "type": qt}
                s.sendto(encode_query(qid, name, QTYPES[qt]), (server, 53))
        done: list[dict[str, Any]] = []
        deadline = t0 + timeout
        while pending and time.monotonic() < deadline:
            ready, _, _ = select.select([s], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            data = s.recv(4096)
            try:
                qid, rcode, answers = decode_header(data)
            except ValueError:
                continue
            q = pending.pop(qid, None)
            if q is not None:
                done.append(
                    {
                        **q,
                        "rcode": RCODES.get(rcode, str(rcode)),
                        "answers": answers,
                        "ms": round((time.monotonic() - t0) * 1000, 1),
                    }
                )
    return {"ok": not pending, "answered": done, "unanswered": list(pending.values())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.tools.dnsq")
    ap.add_argument("names", nargs="+")
    ap.add_argument("--server", required=True)
    ap.add_argument("--types", default="A,AAAA,HTTPS")
    ap.add_argument("--timeout", type=float, default=5.0)
    args = ap.parse_args(argv)
    types = [t.strip().upper() for t in args.types.split(",") if t.strip()]
    unknown = [t for t in types if t not in QTYPES]
    if unknown:
        ap.error(f"unknown types {unknown}; known: {', '.join(QTYPES)}")
    out = ask(args.server, args.names, types, args.timeout)
    print(json.dumps(out))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
