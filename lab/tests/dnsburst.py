"""Ask a resolver, over UDP, a browser's burst of lookups beside names its upstream refuses; report
how long each lookup took (run inside the client namespace; its last line is JSON).

`python dnsburst.py SERVER --page-zone site.test --refused-zone ZONE [--broken-zone ZONE] [--rounds 2]`

Each round first asks `--warm` fresh names one after another, so the resolver's estimate of its
upstream's round trip is that of a quiet link; then a name in `--refused-zone` (one the upstream
refuses) and one in `--broken-zone` (one it answers late, if given), A, AAAA and HTTPS each (what a
browser's background lookups send), and `--gap` seconds later two fresh names in `--page-zone` (the
page's origins, A, AAAA and HTTPS); then waits `--settle` seconds. Every name carries a random label,
so every lookup is cold at every resolver.
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
RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}


def query(qid: int, name: str, qtype: int) -> bytes:
    qname = b"".join(bytes([len(x)]) + x.encode("ascii") for x in name.split(".")) + b"\0"
    return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + qname + struct.pack(">HH", qtype, 1)


def label() -> str:
    return os.urandom(4).hex()


class Asker:
    def __init__(self, server: str) -> None:
        self.server = server
        self.sock = socket.socket(socket.AF_INET6 if ":" in server else socket.AF_INET, socket.SOCK_DGRAM)
        self.pending: dict[int, dict[str, Any]] = {}
        self.done: list[dict[str, Any]] = []

    def send(self, name: str, kind: str) -> None:
        for qt in QTYPES:
            qid = int.from_bytes(os.urandom(2), "big")
            while qid in self.pending:
                qid = (qid + 1) & 0xFFFF
            self.pending[qid] = {"name": name, "type": qt, "kind": kind, "sent": time.monotonic()}
            self.sock.sendto(query(qid, name, QTYPES[qt]), (self.server, 53))

    def receive_until(self, deadline: float, all_answered: bool = False) -> None:
        while time.monotonic() < deadline and not (all_answered and not self.pending):
            ready, _, _ = select.select([self.sock], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return
            data = self.sock.recv(4096)
            if len(data) < 12:
                continue
            qid, flags = struct.unpack(">HH", data[:4])
            q = self.pending.pop(qid, None)
            if q is None or not flags & 0x8000:
                continue
            sent = q.pop("sent")
            self.done.append({**q, "rcode": RCODES.get(flags & 0xF, str(flags & 0xF)),
                              "s": round(time.monotonic() - sent, 3)})

    def drain(self) -> list[dict[str, Any]]:
        out = self.done + [{**{k: v for k, v in q.items() if k != "sent"}, "rcode": None, "s": None}
                           for q in self.pending.values()]
        self.done, self.pending = [], {}
        return out


def main() -> int:
    ap = argparse.ArgumentParser(prog="dnsburst")
    ap.add_argument("server")
    ap.add_argument("--page-zone", required=True)
    ap.add_argument("--refused-zone", required=True)
    ap.add_argument("--broken-zone")
    ap.add_argument("--warm", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--gap", type=float, default=0.3)
    ap.add_argument("--settle", type=float, default=12.0)
    args = ap.parse_args()
    asker = Asker(args.server)
    warm, rounds = [], []
    for _ in range(args.rounds):
        for _ in range(args.warm):
            asker.send(f"{label()}.www.{args.page_zone}", "warm")
            asker.receive_until(time.monotonic() + 3.0, all_answered=True)
            warm += asker.drain()
        asker.send(f"{label()}.{args.refused_zone}", "refused")
        if args.broken_zone:
            asker.send(f"{label()}.{args.broken_zone}", "broken")
        asker.receive_until(time.monotonic() + args.gap)
        page = label()
        for origin in ("www", "static"):
            asker.send(f"{page}.{origin}.{args.page_zone}", "page")
        asker.receive_until(time.monotonic() + args.settle)
        rounds.append(asker.drain())
    print(json.dumps({"warm": warm, "rounds": rounds}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
