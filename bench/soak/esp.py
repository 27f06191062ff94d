"""`python -m bench.soak.esp send|recv`: IPsec ESP packets (IP protocol 50) that must cross the
gateways untouched (their IPsec bypass rules). The payload is SPI, sequence number and bytes
derived from both, so the receiver can tell an intact packet from an altered one without any
shared state; lost packets (the lossy link, faults) are counted apart from altered ones."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import struct
import sys
import time

PROTO_ESP = 50
SPI = 0x50E1_6EE0
HEADER = struct.Struct("!II")  # SPI, sequence number (RFC 4303's first two fields)


def payload(spi: int, seq: int) -> bytes:
    """The whole ESP packet for (spi, seq): 64..1400 bytes, deterministic."""
    seed = hashlib.sha256(HEADER.pack(spi, seq)).digest()
    length = 64 + int.from_bytes(seed[:2], "big") % 1337
    body = b""
    block = seed
    while len(body) < length - HEADER.size:
        block = hashlib.sha256(block).digest()
        body += block
    return HEADER.pack(spi, seq) + body[: length - HEADER.size]


def stopped(stop_file: str) -> bool:
    return bool(stop_file) and os.path.exists(stop_file)


def send(dst: str, duration: float, rate_pps: float, stop_file: str) -> dict[str, int]:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, PROTO_ESP)
    sent = errors = 0
    t0 = time.monotonic()
    seq = 1
    while time.monotonic() - t0 < duration and not stopped(stop_file):
        try:
            s.sendto(payload(SPI, seq), (dst, 0))
            sent += 1
        except OSError:
            errors += 1  # e.g. no route while the routes are gone: the packet never left
        seq += 1
        time.sleep(max(0.0, t0 + seq / rate_pps - time.monotonic()))
    return {"sent": sent, "send_errors": errors, "last_seq": seq - 1}


def recv(duration: float, stop_file: str) -> dict[str, int]:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, PROTO_ESP)
    s.settimeout(0.5)
    seen: set[int] = set()
    intact = altered = duplicates = 0
    t_end = time.monotonic() + duration
    while time.monotonic() < t_end:
        if stopped(stop_file):  # the sender stops too: what is still in flight arrives within 5 s
            t_end = min(t_end, time.monotonic() + 5.0)
        try:
            pkt = s.recv(65535)
        except TimeoutError:
            continue
        ihl = (pkt[0] & 0x0F) * 4
        esp = pkt[ihl:]
        if len(esp) < HEADER.size:
            altered += 1
            continue
        spi, seq = HEADER.unpack_from(esp)
        if spi != SPI:
            continue  # not ours
        if seq in seen:
            duplicates += 1
            continue
        seen.add(seq)
        if esp == payload(spi, seq):
            intact += 1
        else:
            altered += 1
    return {
        "received": len(seen),
        "intact": intact,
        "altered": altered,
        "duplicates": duplicates,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.soak.esp")
    ap.add_argument("mode", choices=("send", "recv"))
    ap.add_argument("--dst", default="10.71.3.10")
    ap.add_argument("--duration", type=float, required=True)
    ap.add_argument("--rate", type=float, default=50.0, help="packets per second")
    ap.add_argument("--stop-file", default="", help="stop once this file exists")
    a = ap.parse_args(argv)
    out = send(a.dst, a.duration, a.rate, a.stop_file) if a.mode == "send" else recv(a.duration, a.stop_file)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
