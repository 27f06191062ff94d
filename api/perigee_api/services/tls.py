"""nginx's TLS certificate: describe the current pair, validate an uploaded one and hand it to the web side.

The TLS directory (settings.tls_dir) is nginx's: cert.pem (the chain, leaf first) and key.pem. The API only
writes files there; it never runs nginx. After writing a new pair it drops a `reload-request` file; the web
side (the web container's entrypoint, a systemd .path unit on the VM, the demo's watcher) runs `nginx -t`,
reloads, and on failure puts the backup pair (cert.pem.prev, key.pem.prev) back. It reports the outcome in
`reload-status` (first line `ok` or `failed`, then a message).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

from perigee_api.services import pinned_https

CERT = "cert.pem"
KEY = "key.pem"
CERT_BACKUP = "cert.pem.prev"
KEY_BACKUP = "key.pem.prev"
RELOAD_REQUEST = "reload-request"
RELOAD_STATUS = "reload-status"
UPLOAD_RECORD = "upload.json"  # who uploaded the current pair, and its fingerprint
UPLOAD_RECORD_BACKUP = "upload.json.prev"

ALLOWED_CURVES = {"secp256r1": "P-256", "secp384r1": "P-384"}
MIN_RSA_BITS = 2048
# A certificate made a moment ago on a machine whose clock is ahead (or this box's behind: a VM without NTP)
# is accepted: clients judge validity by their own clocks anyway.
CLOCK_SKEW = timedelta(hours=1)


class TlsInputError(Exception):
    """An uploaded pair is refused: `field` is `certificate` or `private_key`."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class ValidPair:
    chain: list[x509.Certificate]
    cert_pem: bytes
    key_pem: bytes
    fingerprint: str


def fingerprint(cert: x509.Certificate) -> str:
    return cert.fingerprint(hashes.SHA256()).hex(":").upper()


def _key_description(key: Any) -> str:
    if isinstance(key, rsa.RSAPublicKey | rsa.RSAPrivateKey):
        return f"RSA {key.key_size}"
    if isinstance(key, ec.EllipticCurvePublicKey | ec.EllipticCurvePrivateKey):
        return f"EC {ALLOWED_CURVES.get(key.curve.name, key.curve.name)}"
    return type(key).__name__


def _spki(key: Any) -> bytes:
    der: bytes = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return der


def _signed_by_own_key(cert: x509.Certificate) -> bool:
    """True when the certificate's signature verifies with its own public key (a self-signed certificate)."""
    if cert.issuer != cert.subject:
        return False
    key = cert.public_key()
    try:
        if isinstance(key, rsa.RSAPublicKey):
            assert cert.signature_hash_algorithm is not None
            key.verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), cert.signature_hash_algorithm)
        elif isinstance(key, ec.EllipticCurvePublicKey):
            assert cert.signature_hash_algorithm is not None
            key.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
        else:
            return False
    except (InvalidSignature, AssertionError, ValueError, UnsupportedAlgorithm):
        return False
    return True


def validate(certificate: str, private_key: str, now: datetime | None = None) -> ValidPair:
    """Checks an uploaded pair entirely before anything is written; raises TlsInputError naming the field."""
    now = now or datetime.now(UTC)
    try:
        chain = x509.load_pem_x509_certificates(certificate.encode())
    except ValueError as exc:
        raise TlsInputError("certificate", f"certificate: not a PEM certificate chain ({exc})") from None
    if not chain:
        raise TlsInputError("certificate", "certificate: no BEGIN CERTIFICATE block")
    if "PRIVATE KEY" in certificate:
        raise TlsInputError("certificate", "certificate: contains a private key; put it in private_key only")
    try:
        key = serialization.load_pem_private_key(private_key.encode(), password=None)
    except TypeError:
        raise TlsInputError(
            "private_key",
            "private_key: encrypted keys are not supported (remove the passphrase: openssl pkey -in k.pem -out k2.pem)",
        ) from None
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise TlsInputError("private_key", f"private_key: not a PEM private key ({exc})") from None

    if isinstance(key, rsa.RSAPrivateKey):
        if key.key_size < MIN_RSA_BITS:
            raise TlsInputError("private_key", f"private_key: RSA {key.key_size} bits; at least {MIN_RSA_BITS}")
    elif isinstance(key, ec.EllipticCurvePrivateKey):
        if key.curve.name not in ALLOWED_CURVES:
            raise TlsInputError("private_key", f"private_key: EC curve {key.curve.name}; use P-256 or P-384")
    else:
        raise TlsInputError("private_key", f"private_key: {type(key).__name__}; use RSA (2048+) or EC P-256/P-384")

    leaf = chain[0]
    key_spki = _spki(key.public_key())
    if _spki(leaf.public_key()) != key_spki:
        if any(_spki(c.public_key()) == key_spki for c in chain[1:]):
            raise TlsInputError("certificate", "certificate: the key's own certificate (the leaf) must come first")
        raise TlsInputError("private_key", "private_key: does not match the certificate's public key")
    if now >= leaf.not_valid_after_utc:
        raise TlsInputError("certificate", f"certificate: expired on {leaf.not_valid_after_utc.isoformat()}")
    if now + CLOCK_SKEW < leaf.not_valid_before_utc:
        raise TlsInputError("certificate", f"certificate: not valid before {leaf.not_valid_before_utc.isoformat()}")

    # Written back normalized: only the certificates, and the key unencrypted in PKCS#8.
    cert_pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return ValidPair(chain=chain, cert_pem=cert_pem, key_pem=key_pem, fingerprint=fingerprint(leaf))


def _sans(cert: x509.Certificate) -> list[str]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    out = [f"DNS:{n}" for n in ext.get_values_for_type(x509.DNSName)]
    out += [f"IP:{a}" for a in ext.get_values_for_type(x509.IPAddress)]
    return out


def describe(tls_dir: Path) -> dict[str, Any] | None:
    """The current certificate, or None when the directory has none (nginx has not made one yet)."""
    try:
        chain = x509.load_pem_x509_certificates((tls_dir / CERT).read_bytes())
    except (OSError, ValueError):
        return None
    if not chain:
        return None
    leaf = chain[0]
    fp = fingerprint(leaf)
    record = _upload_record(tls_dir)
    uploaded = record is not None and record.get("fingerprint") == fp
    return {
        "subject": leaf.subject.rfc4514_string(),
        "issuer": leaf.issuer.rfc4514_string(),
        "sans": _sans(leaf),
        "not_before": leaf.not_valid_before_utc.timestamp(),
        "not_after": leaf.not_valid_after_utc.timestamp(),
        "fingerprint_sha256": fp,
        "spki_pin": pinned_https.spki_pin(leaf.public_bytes(serialization.Encoding.DER)),
        "key_type": _key_description(leaf.public_key()),
        "chain_length": len(chain),
        "self_signed": _signed_by_own_key(leaf),
        "source": "uploaded" if uploaded else "generated",
        "uploaded_by": record.get("by") if uploaded and record else None,
        "uploaded_at": record.get("at") if uploaded and record else None,
    }


def _upload_record(tls_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((tls_dir / UPLOAD_RECORD).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def reload_state(tls_dir: Path) -> dict[str, Any]:
    """pending while the web side has not taken the request; else what it last reported."""
    if (tls_dir / RELOAD_REQUEST).exists():
        return {"state": "pending", "message": "waiting for nginx to reload", "at": None}
    status = tls_dir / RELOAD_STATUS
    try:
        text = status.read_text()
        at = status.stat().st_mtime
    except OSError:
        return {"state": "none", "message": None, "at": None}
    first, _, rest = text.partition("\n")
    state = first.strip() if first.strip() in ("ok", "failed") else "failed"
    return {"state": state, "message": rest.strip()[:2000] or None, "at": at}


def backup_available(tls_dir: Path) -> bool:
    return (tls_dir / CERT_BACKUP).is_file() and (tls_dir / KEY_BACKUP).is_file()


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Temp file in the same directory, fsync, rename: a reader sees the old file or the new one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def install(tls_dir: Path, pair: ValidPair, actor: str) -> bool:
    """Backs up the current pair, writes the new one and asks the web side to reload. True if backed up."""
    if not tls_dir.is_dir():
        raise FileNotFoundError(f"TLS directory {tls_dir} does not exist")
    cert, key = tls_dir / CERT, tls_dir / KEY
    backed_up = False
    old_key = b""
    if cert.is_file() and key.is_file():
        old_cert, old_key = cert.read_bytes(), key.read_bytes()  # both read before anything is written
        _write_atomic(tls_dir / CERT_BACKUP, old_cert, 0o644)
        _write_atomic(tls_dir / KEY_BACKUP, old_key, 0o600)
        backed_up = True
    # Key first: nginx only reloads on the request below, by then both files are the new pair.
    _write_atomic(key, pair.key_pem, 0o600)
    try:
        _write_atomic(cert, pair.cert_pem, 0o644)
    except OSError:
        if backed_up:  # never leave the new key beside the old certificate
            _write_atomic(key, old_key, 0o600)
        raise
    # Who uploaded the backed-up pair goes with it (the web side puts it back with a refused pair).
    previous_record = tls_dir / UPLOAD_RECORD
    if previous_record.is_file():
        _write_atomic(tls_dir / UPLOAD_RECORD_BACKUP, previous_record.read_bytes(), 0o644)
    else:
        (tls_dir / UPLOAD_RECORD_BACKUP).unlink(missing_ok=True)
    record = {"fingerprint": pair.fingerprint, "by": actor, "at": time.time()}
    _write_atomic(tls_dir / UPLOAD_RECORD, json.dumps(record).encode(), 0o644)
    _write_atomic(tls_dir / RELOAD_REQUEST, f"{pair.fingerprint}\n".encode(), 0o644)
    return backed_up
