"""Paced UDP source and counting sink, for exact rate/loss/BoD measurements through the link.

Each datagram carries a sequence number (8 bytes) and the send time (8 bytes), padded to size.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

HDR = struct.Struct(">Qd")
# Bytes a datagram adds on the wire beyond its payload: UDP + IP + Ethernet header.
OVERHEAD = {socket.AF_INET: 8 + 20 + 14, socket.AF_INET6: 8 + 40 + 14}


def _family(addr: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def send(to: str, port: int, rate_bps: float, size: int, duration: float) -> dict[str, Any]:
    """Send size-byte datagrams so that their Ethernet frames total rate_bps, for duration s."""
    fam = _family(to)
    frame = size + OVERHEAD[fam]
    interval = frame * 8 / rate_bps
    pad = b"\0" * max(0, size - HDR.size)
    sent, t0 = 0, time.monotonic()
    with socket.socket(fam, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * 1024 * 1024)
        s.connect((to, port))
        while True:
            due = t0 + sent * interval
            now = time.monotonic()
            if due - t0 >= duration:
                break
            if due > now:
                time.sleep(due - now)
            try:
                s.send(HDR.pack(sent, time.time()) + pad)
            except (ConnectionRefusedError, BlockingIOError):
                pass  # no sink yet / local queue full: still counts as offered
            sent += 1
    return {"sent": sent, "size": size, "frame_bytes": frame, "duration_s": time.monotonic() - t0,
            "rate_bps": rate_bps, "t0_monotonic": t0}


def receive(port: int, bind: str = "::", timeout: float = 30.0, idle: float = 3.0,
            expect: int | None = None) -> dict[str, Any]:
    """Count datagrams until `idle` s pass without one (after the first), `expect` arrived, or timeout."""
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * 1024 * 1024)
        s.bind((bind, port))
        print("ready", flush=True)
        start = time.monotonic()
        seqs: set[int] = set()
        arrivals: list[tuple[float, int]] = []
        frame_overhead = OVERHEAD[socket.AF_INET]
        while True:
            now = time.monotonic()
            left = timeout - (now - start)
            if arrivals:
                left = min(left, idle - (now - arrivals[-1][0]))
            if left <= 0 or (expect is not None and len(seqs) >= expect):
                break
            s.settimeout(left)
            try:
                data, src = s.recvfrom(65536)
            except TimeoutError:
                break
            t = time.monotonic()
            if len(data) < HDR.size:
                continue
            if not arrivals:
                frame_overhead = OVERHEAD[socket.AF_INET6 if not src[0].startswith("::ffff:") else socket.AF_INET]
            seq, _sent = HDR.unpack_from(data)
            seqs.add(seq)
            arrivals.append((t, len(data)))
    if not arrivals:
        return {"packets": 0, "bytes": 0}
    t_first, t_last = arrivals[0][0], arrivals[-1][0]
    payload = sum(n for _, n in arrivals)
    frames = payload + frame_overhead * len(arrivals)
    span = t_last - t_first
    # Rate over [first, last] arrival: the bytes after the first packet, over the span.
    frames_after_first = frames - (arrivals[0][1] + frame_overhead)
    return {
        "packets": len(arrivals), "unique": len(seqs), "bytes": payload, "frame_bytes": frames,
        "max_seq": max(seqs), "lost": max(seqs) + 1 - len(seqs), "span_s": span,
        "frame_rate_bps": frames_after_first * 8 / span if span > 0 else 0.0,
        "t_first_offset_s": t_first - start, "t_first_monotonic": t_first,
        "arrivals": [(round(t - t_first, 6), n) for t, n in arrivals],
    }
