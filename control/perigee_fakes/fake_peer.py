"""The fake gateway's peer path and identity (perigee_fakes.fake_gateway serves them): what the real daemon answers
on GET /v1/identity, POST /v1/identity/rotate and /commit, and GET /v1/peer, with connections simulated from the
config it runs.

The identity is a real one: a P-256 key pair and a self-signed certificate made here, its fingerprint `sha256:`
and the hex SHA-256 of the certificate's SubjectPublicKeyInfo, as the daemon computes it. At a hub, a test names
the terminal identities that keep dialing in (`dial`): one that the running config enrolls holds its pool of idle
connections and its live flows, one it does not is refused (`refused_unknown` counts each attempt), and applying a
config that no longer enrolls it closes its connections at once, as the daemon does within 5 s.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Identity:
    fingerprint: str
    certificate_pem: str


def new_identity(name: str = "perigee-fake") -> Identity:
    """A fresh identity as a gateway makes its own: key pair, self-signed certificate, SPKI fingerprint."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + timedelta(days=3650))
        .sign(key, hashes.SHA256())
    )
    spki = cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return Identity(
        "sha256:" + hashlib.sha256(spki).hexdigest(), cert.public_bytes(serialization.Encoding.PEM).decode()
    )


@dataclass
class Dialer:
    """A terminal identity dialing this hub, with the pool it holds once admitted."""

    idle: int = 4
    live: int = 0
    connected: bool = False
    last_seen: float | None = None


@dataclass
class FakePeerPath:
    identity: Identity = field(default_factory=new_identity)
    staged: Identity | None = None
    dialers: dict[str, Dialer] = field(default_factory=dict)
    refused_unknown: int = 0
    # A terminal's own side: how many warm connections it holds to its hub (set by tests).
    pool_ready: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def dial(self, fingerprint: str, idle: int = 4, live: int = 0) -> None:
        """A terminal with this identity keeps connecting to this hub (a pool of `idle`, `live` flows when in)."""
        with self._lock:
            self.dialers[fingerprint] = Dialer(idle=idle, live=live)

    def rotate(self) -> dict[str, Any]:
        with self._lock:
            self.staged = new_identity()
        return self.answer_identity()

    def commit(self) -> dict[str, Any] | None:
        """None when nothing is staged."""
        with self._lock:
            if self.staged is None:
                return None
            self.identity, self.staged = self.staged, None
        return self.answer_identity()

    def answer_identity(self) -> dict[str, Any]:
        return {
            "fingerprint": self.identity.fingerprint,
            "certificate_pem": self.identity.certificate_pem,
            "next_fingerprint": self.staged.fingerprint if self.staged else None,
        }

    def applied(self, config: dict[str, Any]) -> None:
        """A new config runs: an identity it no longer enrolls loses its connections now."""
        enrolled = _enrolled_fingerprints(config)
        with self._lock:
            for fp, d in self.dialers.items():
                if d.connected and fp not in enrolled:
                    d.connected = False

    def answer_peer(self, config: dict[str, Any] | None) -> dict[str, Any]:
        """GET /v1/peer (the daemon's PeerStatus)."""
        cfg = config or {}
        peer = cfg.get("peer") or {}
        enabled = bool(peer.get("enabled"))
        answer: dict[str, Any] = {
            "role": cfg.get("role"),
            "enabled": enabled,
            "identity": self.identity.fingerprint,
            "identity_error": None,
            "listening": False,
            "terminals": [],
            "refused_unknown": 0,
            "egress_refused": 0,
            "pool": None,
        }
        if cfg.get("role") == "terminal":
            if enabled:
                answer["pool"] = {
                    "hub": f"{peer.get('hub')}:{peer.get('port', 7072)}",
                    "hub_fingerprints": list(peer.get("hub_fingerprints") or []),
                    "ready": self.pool_ready,
                    "error": None,
                }
            return answer
        if cfg.get("role") != "hub":
            return answer
        now = time.time()
        with self._lock:
            enrolled = _enrolled_fingerprints(cfg)
            for fp, d in self.dialers.items():
                if fp in enrolled and enabled:
                    d.connected, d.last_seen = True, now
                else:
                    self.refused_unknown += 1
            for t in peer.get("terminals") or []:
                ds = [self.dialers[fp] for fp in t["fingerprints"] if fp in self.dialers]
                up = [d for d in ds if d.connected]
                seen = [d.last_seen for d in ds if d.last_seen is not None]
                answer["terminals"].append(
                    {
                        "name": t["name"],
                        "fingerprints": list(t["fingerprints"]),
                        "prefixes": list(t["prefixes"]),
                        "idle_connections": sum(d.idle for d in up),
                        "live_flows": sum(d.live for d in up),
                        "refused_prefix": 0,
                        "refused_other": 0,
                        "last_seen": max(seen) if seen else None,
                    }
                )
            answer.update(listening=enabled, refused_unknown=self.refused_unknown)
        return answer


def _enrolled_fingerprints(config: dict[str, Any]) -> set[str]:
    peer = config.get("peer") or {}
    return {fp for t in peer.get("terminals") or [] for fp in t.get("fingerprints") or []}
