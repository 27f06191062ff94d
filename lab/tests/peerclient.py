"""The peer path's protocol spoken from a test (docs/splitter.md, *The peer path*): a second,
independent implementation of its frames, and an outsider's tools (replays, wrong keys, garbage).
Imported by test_relay_satlab.py inside the lab's terminal namespace."""

from __future__ import annotations

import hashlib
import hmac
import socket
import struct

HUB = "10.71.2.2"
PEER_PORT = 7072


class PeerClient:
    """One TCP connection to the hub's peer port from `source`."""

    def __init__(self, source: str, timeout: float = 5.0) -> None:
        self.s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.bind((source, 0))
        self.s.connect((HUB, PEER_PORT))

    def recv_exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.s.recv(n - len(out))
            if not chunk:
                raise ConnectionError(f"closed after {len(out)} of {n} bytes")
            out += chunk
        return out

    def hello(self) -> bytes:
        f = self.recv_exact(40)
        assert f[:5] == b"PGPH\x01"
        return f[8:]

    @staticmethod
    def mac(key: bytes, *parts: bytes) -> bytes:
        return hmac.new(key, b"".join(parts), hashlib.sha256).digest()

    def auth_frame(self, key: bytes, nonce: bytes) -> bytes:
        return b"PGPA" + self.mac(key, b"perigee-peer-v1 auth", nonce)

    @classmethod
    def open_frame(cls, key: bytes, nonce: bytes, client: str, cport: int, server: str, sport: int) -> bytes:
        def a16(ip: str) -> bytes:
            return socket.inet_pton(socket.AF_INET6, f"::ffff:{ip}" if ":" not in ip else ip)

        body = b"PGPO" + struct.pack("!BBHHH", 4 if ":" not in client else 6, 0, cport, sport, 0) + a16(client) + a16(
            server)
        return body + cls.mac(key, b"perigee-peer-v1 open", nonce, body)

    def closed_by_hub(self) -> bool:
        """The hub reset or closed the connection (and sent nothing more)."""
        try:
            return self.s.recv(64) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.s.close()
