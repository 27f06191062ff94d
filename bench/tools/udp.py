"""Paced UDP source and counting sink, for pushing a fixed packet rate through the link emulator.

`blast` sends `size`-byte UDP payloads (1472 → 1500-byte IP packets) at a target IP-level rate;
`sink` counts what arrives. Each prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from typing import Any

IP_UDP_HEADERS = 28


def blast(args: argparse.Namespace) -> dict[str, Any]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payload = bytes(args.size)
    # The emulator paces Ethernet frames, so the link-layer header counts toward the rate.
    packet_bits = (args.size + IP_UDP_HEADERS + args.l2_overhead) * 8
    t0 = time.monotonic()
    end = t0 + args.duration
    sent = errors = 0
    while True:
        now = time.monotonic()
        if now >= end:
            break
        due = int((now - t0) * args.rate_bps / packet_bits)
        while sent < due:
            try:
                sock.sendto(payload, (args.to, args.port))
            except OSError:
                errors += 1  # a full local queue counts as a send the link never saw
            sent += 1
        time.sleep(0.0005)
    return {
        "role": "blast",
        "t_start": t0,
        "t_end": time.monotonic(),
        "packets": sent,
        "send_errors": errors,
        "packet_bytes": args.size + IP_UDP_HEADERS,
        "frame_bytes": args.size + IP_UDP_HEADERS + args.l2_overhead,
    }


def sink(args: argparse.Namespace) -> dict[str, Any]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind((args.bind, args.port))
    print("LISTENING", flush=True)
    sock.settimeout(args.idle)
    packets = nbytes = 0
    first = last = None
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        try:
            n = len(sock.recv(65535))
        except TimeoutError:
            if packets:
                break  # the source has stopped
            continue
        now = time.monotonic()
        first = now if first is None else first
        last = now
        packets += 1
        nbytes += n + IP_UDP_HEADERS
    return {
        "role": "sink",
        "packets": packets,
        "ip_bytes": nbytes,
        "t_first": first,
        "t_last": last,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.tools.udp")
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("blast")
    b.add_argument("--to", required=True)
    b.add_argument("--port", type=int, required=True)
    b.add_argument("--rate-bps", type=float, required=True)
    b.add_argument("--size", type=int, default=1472)
    b.add_argument("--duration", type=float, required=True)
    b.add_argument(
        "--l2-overhead",
        type=int,
        default=0,
        help="link-layer bytes per packet counted in the rate",
    )
    s = sub.add_parser("sink")
    s.add_argument("--bind", default="0.0.0.0")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--idle", type=float, default=1.0)
    s.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    json.dump(blast(args) if args.cmd == "blast" else sink(args), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
