"""Read struct tcp_info (linux/tcp.h) from a socket we own."""

from __future__ import annotations

import socket
import struct
from typing import Any

TCP_INFO = getattr(socket, "TCP_INFO", 11)
TCP_CONGESTION = getattr(socket, "TCP_CONGESTION", 13)

# Offsets of the fields we use in struct tcp_info (stable ABI, appended to only).
_FIELDS = {
    "snd_mss": (16, "I"),
    "unacked": (24, "I"),
    "lost": (32, "I"),
    "retrans": (36, "I"),
    "rtt_us": (68, "I"),
    "rttvar_us": (72, "I"),
    "snd_ssthresh": (76, "I"),
    "snd_cwnd": (80, "I"),
    "total_retrans": (100, "I"),
    "pacing_rate": (104, "Q"),
    "bytes_acked": (120, "Q"),
    "delivery_rate": (160, "Q"),
    # µs the sender was busy, and held back by the peer's window / its own send buffer.
    "busy_time_us": (168, "Q"),
    "rwnd_limited_us": (176, "Q"),
    "sndbuf_limited_us": (184, "Q"),
}
_INFO_LEN = 192


def decode(raw: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {"ca_state": raw[1] if len(raw) > 1 else None}
    for name, (offset, fmt) in _FIELDS.items():
        size = struct.calcsize(fmt)
        if len(raw) >= offset + size:
            out[name] = struct.unpack_from("=" + fmt, raw, offset)[0]
    return out


def read(sock: socket.socket) -> dict[str, Any]:
    return decode(sock.getsockopt(socket.IPPROTO_TCP, TCP_INFO, _INFO_LEN))


def set_congestion(sock: socket.socket, name: str) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, name.encode())


def congestion(sock: socket.socket) -> str:
    return sock.getsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, 16).split(b"\0", 1)[0].decode()
