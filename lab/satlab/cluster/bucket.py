"""The routers' bucket of an IPv4 TCP flow, in Python: a copy of the gateway's
`gateway/crates/perigee/src/gateway/cluster/hash.rs` (the kernel's multipath hash, policy 3, fields
0x0037, a resilient group), for lab tools that aim flows at the gateway that holds them (the hub-scale
benchmark's simulated terminals). Check a table with `agrees(table)`: its `checks` are flows whose
gateway the hub router's kernel named.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

FIELDS = 0x0037
BUCKETS = 64
_M64 = (1 << 64) - 1
_M32 = (1 << 32) - 1
OFF_IP_PROTO, OFF_PORTS, OFF_ADDRS = 2, 28, 36
LEN_V4 = 80 - 8 - (32 - 8)


def _rotl64(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _M64


def siphash24(k0: int, k1: int, data: bytes) -> int:
    """SipHash-2-4 with the key words (k0, k1), as the kernel's `siphash` and Rust's SipHasher24."""
    v0, v1 = k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D
    v2, v3 = k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573

    def rounds(n: int) -> None:
        nonlocal v0, v1, v2, v3
        for _ in range(n):
            v0 = (v0 + v1) & _M64
            v1 = _rotl64(v1, 13) ^ v0
            v0 = _rotl64(v0, 32)
            v2 = (v2 + v3) & _M64
            v3 = _rotl64(v3, 16) ^ v2
            v0 = (v0 + v3) & _M64
            v3 = _rotl64(v3, 21) ^ v0
            v2 = (v2 + v1) & _M64
            v1 = _rotl64(v1, 17) ^ v2
            v2 = _rotl64(v2, 32)

    n = len(data)
    end = n - n % 8
    for i in range(0, end, 8):
        m = int.from_bytes(data[i:i + 8], "little")
        v3 ^= m
        rounds(2)
        v0 ^= m
    last = ((n & 0xFF) << 56) | int.from_bytes(data[end:], "little")
    v3 ^= last
    rounds(2)
    v0 ^= last
    v2 ^= 0xFF
    rounds(4)
    return v0 ^ v1 ^ v2 ^ v3


def _rotl32(x: int, b: int) -> int:
    return ((x << b) | (x >> (32 - b))) & _M32


def jhash_2words(a: int, b: int, initval: int = 0) -> int:
    iv = (initval + 0xDEADBEEF + (2 << 2)) & _M32
    a, b, c = (a + iv) & _M32, (b + iv) & _M32, iv
    c ^= b
    c = (c - _rotl32(b, 14)) & _M32
    a ^= c
    a = (a - _rotl32(c, 11)) & _M32
    b ^= a
    b = (b - _rotl32(a, 25)) & _M32
    c ^= b
    c = (c - _rotl32(b, 16)) & _M32
    a ^= c
    a = (a - _rotl32(c, 4)) & _M32
    b ^= a
    b = (b - _rotl32(a, 14)) & _M32
    c ^= b
    return (c - _rotl32(b, 24)) & _M32


def flow_hash(seed: int, src: str, sport: int, dst: str, dport: int) -> int:
    """The forwarded packet's hash (after `fib_multipath_hash`'s `>> 1`), IPv4, fields 0x0037."""
    keys = bytearray(LEN_V4)
    keys[OFF_IP_PROTO] = 6
    s, d = socket.inet_aton(src), socket.inet_aton(dst)
    if struct.unpack("<I", d)[0] < struct.unpack("<I", s)[0]:
        s, d = d, s
    keys[OFF_ADDRS:OFF_ADDRS + 8] = s + d
    sp, dp = struct.pack("!H", sport), struct.pack("!H", dport)
    if struct.unpack("<H", dp)[0] < struct.unpack("<H", sp)[0]:
        sp, dp = dp, sp
    keys[OFF_PORTS:OFF_PORTS + 4] = sp + dp
    word = ((seed & _M32) << 32) | (seed & _M32)
    h = max(siphash24(word, word, bytes(keys)) & _M32, 1)
    return jhash_2words(h, 0, 0) >> 1


def bucket(seed: int, src: str, sport: int, dst: str, dport: int, buckets: int = BUCKETS) -> int:
    return flow_hash(seed, src, sport, dst, dport) % buckets


def owner(table: dict[str, Any], client: str, cport: int, server: str, sport: int) -> str | None:
    """The member a cluster table (GET /v1/cluster/table's `table`) gives the flow client -> server."""
    buckets: list[str | None] = table["buckets"]
    return buckets[bucket(int(table["seed"]), client, cport, server, sport, len(buckets))]


def agrees(table: dict[str, Any]) -> bool:
    """True when this hash gives every check flow of the table the member the router's kernel named."""
    for c in table.get("checks") or []:
        s_ip, s_port = c["src"].rsplit(":", 1)
        d_ip, d_port = c["dst"].rsplit(":", 1)
        if owner(table, s_ip, int(s_port), d_ip, int(d_port)) != c["member"]:
            return False
    return bool(table.get("checks"))
