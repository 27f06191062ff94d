"""The fleet's certificate authority: the API's client identity and each gateway's server certificate.

The control protocol across hosts is TLS 1.3 with certificates on both sides from one fleet CA that the API
creates on first use in `<data_dir>/fleet/` (ca.pem, ca.key, client.pem, client.key; keys mode 0600). A
gateway's server certificate names its registered host (IP or DNS SAN) and is issued once, at registration;
its private key is handed out in that answer and not kept.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
LEAF_DAYS = 825
BACKDATE = timedelta(hours=1)  # a gateway whose clock is a little behind still accepts a fresh certificate
_lock = threading.Lock()


@dataclass(frozen=True)
class IssuedPair:
    cert_pem: str
    key_pem: str
    fingerprint: str
    not_after: float


@dataclass(frozen=True)
class FleetFiles:
    ca: Path
    ca_key: Path
    client_cert: Path
    client_key: Path


def files(data_dir: Path) -> FleetFiles:
    d = data_dir / "fleet"
    return FleetFiles(d / "ca.pem", d / "ca.key", d / "client.pem", d / "client.key")


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Perigee fleet"), x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    )


def _leaf(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    cn: str,
    san: list[x509.GeneralName],
    usage: x509.ObjectIdentifier,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    b = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + timedelta(days=LEAF_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if san:
        b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return b.sign(ca_key, hashes.SHA256()), key


def ensure(data_dir: Path) -> FleetFiles:
    """The CA and the API's client pair, created on first use."""
    f = files(data_dir)
    with _lock:
        if f.ca.exists() and f.ca_key.exists() and f.client_cert.exists() and f.client_key.exists():
            return f
        f.ca.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        ca_key = ec.generate_private_key(ec.SECP384R1())
        now = datetime.now(UTC)
        ca = (
            x509.CertificateBuilder()
            .subject_name(_name("Perigee fleet CA"))
            .issuer_name(_name("Perigee fleet CA"))
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE)
            .not_valid_after(now + timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA384())
        )
        client, client_key = _leaf(ca, ca_key, "perigee-api", [], ExtendedKeyUsageOID.CLIENT_AUTH)
        _write_private(f.ca_key, _key_pem(ca_key))
        _write_private(f.client_key, _key_pem(client_key))
        f.client_cert.write_bytes(client.public_bytes(serialization.Encoding.PEM))
        f.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))  # last: its presence means "complete"
        return f


def ca_pem(data_dir: Path) -> str:
    return ensure(data_dir).ca.read_text()


def san_for(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def issue_server(data_dir: Path, name: str, host: str) -> IssuedPair:
    """A gateway's server certificate for `host` (what the API dials), signed by the fleet CA."""
    f = ensure(data_dir)
    ca = x509.load_pem_x509_certificate(f.ca.read_bytes())
    ca_key = serialization.load_pem_private_key(f.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    cert, key = _leaf(ca, ca_key, f"perigee-gateway {name}", [san_for(host)], ExtendedKeyUsageOID.SERVER_AUTH)
    return IssuedPair(
        cert_pem=cert.public_bytes(serialization.Encoding.PEM).decode(),
        key_pem=_key_pem(key).decode(),
        fingerprint=cert.fingerprint(hashes.SHA256()).hex(":").upper(),
        not_after=cert.not_valid_after_utc.timestamp(),
    )


def client_context(data_dir: Path) -> ssl.SSLContext:
    """What the API dials gateways with: TLS 1.3, the fleet CA as the only trust anchor, its client pair."""
    f = ensure(data_dir)
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(f.ca))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(str(f.client_cert), str(f.client_key))
    return ctx
