"""Self-signed (or CA-signed) certificates and their keys, for tests that need a TLS pair: nginx's front, the hub's
HTTPS, the TLS upload route."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

Key = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


def make_key(kind: str = "ec256") -> Key:
    """`kind`: ec256, ec521 or rsa<bits>."""
    if kind == "ec256":
        return ec.generate_private_key(ec.SECP256R1())
    if kind == "ec521":
        return ec.generate_private_key(ec.SECP521R1())
    return rsa.generate_private_key(public_exponent=65537, key_size=int(kind.removeprefix("rsa")))


def _san(entry: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(entry))
    except ValueError:
        return x509.DNSName(entry)


def certificate(
    key: Key,
    name: str,
    *,
    not_before: datetime | timedelta = timedelta(0),
    not_after: datetime | timedelta = timedelta(days=1),
    sans: Sequence[str] = (),
    serial: int | None = None,
    issuer_key: Key | None = None,
    issuer_name: str | None = None,
) -> x509.Certificate:
    """A certificate for `key` with CN `name`, self-signed unless `issuer_key` is given. Validity bounds are instants,
    or offsets from now; `sans` are DNS names or IP addresses (no SAN extension when empty)."""
    now = datetime.now(UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer_name or name)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number() if serial is None else serial)
        .not_valid_before(now + not_before if isinstance(not_before, timedelta) else not_before)
        .not_valid_after(now + not_after if isinstance(not_after, timedelta) else not_after)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName([_san(s) for s in sans]), critical=False)
    return builder.sign(issuer_key or key, hashes.SHA256())


def cert_pem(*certs: x509.Certificate) -> str:
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


def key_pem(key: Key) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def write_pair(directory: Path, key: Key, cert: x509.Certificate) -> tuple[Path, Path]:
    """cert.pem and key.pem in `directory` (made if missing), as nginx and uvicorn read them."""
    directory.mkdir(parents=True, exist_ok=True)
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_text(cert_pem(cert))
    key_file.write_text(key_pem(key))
    return cert_file, key_file
