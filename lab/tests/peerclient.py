"""The peer path spoken from a test (docs/splitter.md, *The peer path*): a second, independent
implementation of its frames over Python's TLS 1.3 (OpenSSL), and an outsider's tools (an unknown
key, no key, garbage). Imported by test_peer_satlab.py inside the lab's terminal namespace."""

from __future__ import annotations

import hashlib
import socket
import ssl
import struct

from cryptography import x509
from cryptography.hazmat.primitives import serialization

HUB = "10.71.2.2"
PEER_PORT = 7072
ALPN = "perigee-peer/2"
READY = b"PGPR\x02\x00\x00\x00"


def fingerprint(cert_der: bytes) -> str:
    """sha256: + hex of the certificate's SubjectPublicKeyInfo, as the gateways pin it."""
    key = x509.load_der_x509_certificate(cert_der).public_key()
    spki = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def a16(ip: str) -> bytes:
    return socket.inet_pton(socket.AF_INET6, f"::ffff:{ip}" if ":" not in ip else ip)


def open_flow(client: str, cport: int, server: str, sport: int) -> bytes:
    fam = 4 if ":" not in client else 6
    return b"PGPO" + struct.pack("!BBHHBB", 1, 0, cport, sport, fam, 0) + a16(client) + a16(server)


def open_resolver() -> bytes:
    return b"PGPO\x02" + bytes(39)


class PeerClient:
    """One TLS connection to the hub's peer port from `source`, presenting `identity` (a PEM with
    the certificate and its key, as a gateway keeps it) or nothing."""

    def __init__(self, identity: str | None, source: str = "10.71.2.1", timeout: float = 5.0,
                 hub: str = HUB) -> None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # pinned below, as the gateways do
        if identity:
            ctx.load_cert_chain(identity)
        ctx.set_alpn_protocols([ALPN])
        raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        raw.settimeout(timeout)
        raw.bind((source, 0))
        raw.connect((hub, PEER_PORT))
        self.raw = raw
        self.s = ctx.wrap_socket(raw)
        der = self.s.getpeercert(binary_form=True)
        assert der is not None
        self.hub_fingerprint = fingerprint(der)

    def recv_exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.s.recv(n - len(out))
            if not chunk:
                raise ConnectionError(f"closed after {len(out)} of {n} bytes")
            out += chunk
        return out

    def ready(self) -> bool:
        """READY arrived: the hub identified this key. False: it refused the connection (with TLS
        1.3 the client's certificate is judged after the client's side of the handshake ends)."""
        try:
            return self.recv_exact(8) == READY
        except (ssl.SSLError, ConnectionError, OSError):
            return False

    def status(self) -> tuple[int, int]:
        """STATUS: (code, errno); code 0 connected, 1 the hub's connect failed, 2 refused."""
        f = self.recv_exact(8)
        assert f[:4] == b"PGPS", f
        return f[4], struct.unpack("!H", f[6:8])[0]

    def closed_by_hub(self) -> bool:
        """The hub ended the connection (alert, close_notify, FIN or reset) and sent nothing more."""
        try:
            return self.s.recv(64) == b""
        except (ssl.SSLError, ConnectionError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.s.close()


def raw_connection(source: str = "10.71.2.1", timeout: float = 5.0) -> socket.socket:
    """A plain TCP connection to the peer port (for garbage where a handshake belongs)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect((HUB, PEER_PORT))
    return s


def closed(s: socket.socket) -> bool:
    """The hub ended a plain connection (whatever it sent first, e.g. a TLS alert)."""
    try:
        while s.recv(4096):
            pass
        return True
    except ConnectionError:
        return True
    except TimeoutError:
        return False
