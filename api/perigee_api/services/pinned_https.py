"""One HTTPS request to a hub's API, trusting exactly the certificate key its operator gave: `sha256:` and the hex
SHA-256 of the certificate's SubjectPublicKeyInfo (the pin). A hub's API certificate is usually self-signed, so no
CA is asked; the pin is checked right after the TLS handshake, before a byte of the request (which carries a
token or a key) is sent. The TLS itself is the standard library's; the certificate is read by `cryptography`.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import re
import ssl
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

MAX_ANSWER_BYTES = 4 * 1024 * 1024
URL_RE = re.compile(r"^https://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::([0-9]{1,5}))?/?$")


class HubError(Exception):
    """No usable answer: `code` is hub_unreachable, hub_pin_mismatch or hub_bad_answer."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any


@dataclass(frozen=True)
class Target:
    host: str
    port: int


def parse_url(url: str) -> Target:
    m = URL_RE.match(url)
    if not m:
        raise HubError("hub_unreachable", f"{url!r} is not https://host[:port]")
    port = int(m.group(2) or 443)
    if not 1 <= port <= 65535:
        raise HubError("hub_unreachable", f"{url!r}: the port must be 1..65535")
    return Target(m.group(1).strip("[]"), port)


def spki_pin(der_certificate: bytes) -> str:
    cert = x509.load_der_x509_certificate(der_certificate)
    spki = cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def _context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    # The pin is the trust: no CA and no name are checked (the hub's certificate is its own), the key is.
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def request(
    url: str,
    pin: str,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout_s: float = 30.0,
) -> Answer:
    """Sends one request to the hub at `url` once its certificate matches `pin`; the status and the JSON answer
    (None when empty). Raises HubError when no usable answer came (the pin's mismatch among them)."""
    target = parse_url(url)
    conn = http.client.HTTPSConnection(target.host, target.port, timeout=timeout_s, context=_context())
    try:
        try:
            conn.connect()
        except (OSError, ssl.SSLError) as exc:
            raise HubError("hub_unreachable", f"the hub at {url} cannot be reached: {exc}") from None
        sock = conn.sock
        der = sock.getpeercert(binary_form=True) if isinstance(sock, ssl.SSLSocket) else None
        if not der:
            raise HubError("hub_pin_mismatch", f"the hub at {url} showed no certificate")
        got = spki_pin(der)
        if not hmac.compare_digest(got.encode(), pin.encode()):
            raise HubError(
                "hub_pin_mismatch",
                f"the hub at {url} shows a certificate key {got}, not the pinned {pin}: nothing was sent to it; "
                "check the pin with the hub's operator",
            )
        data = json.dumps(body).encode() if body is not None else None
        sent = {"Accept": "application/json", **(headers or {})}
        if data is not None:
            sent["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=data, headers=sent)
            resp = conn.getresponse()
            raw = resp.read(MAX_ANSWER_BYTES + 1)
        except (TimeoutError, OSError, http.client.HTTPException) as exc:
            raise HubError("hub_unreachable", f"the hub at {url} did not answer: {exc}") from None
        if len(raw) > MAX_ANSWER_BYTES:
            raise HubError("hub_bad_answer", f"the hub at {url} answered more than {MAX_ANSWER_BYTES} bytes")
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            raise HubError("hub_bad_answer", f"the hub at {url} answered {resp.status} with no JSON") from None
        return Answer(resp.status, parsed)
    finally:
        conn.close()
