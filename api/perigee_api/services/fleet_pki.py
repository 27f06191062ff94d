"""The fleet's certificate authority: the API's client identity, each gateway's server certificate, and the
list of the certificates it revoked.

The control protocol across hosts is TLS 1.3 with certificates on both sides from one fleet CA that the API
creates on first use in `<data_dir>/fleet/` (ca.pem, ca.key, client.pem, client.key; keys mode 0600). A
gateway's server certificate names its registered host (IP or DNS SAN) and is issued once, at registration
(397 days); its private key is handed out in that answer and not kept. The API's client certificate lives 90 days
and is renewed by the API itself 30 days before it ends. The revocation list (crl.pem, signed by the CA) names
the certificates of removed gateways: the API refuses a server presenting one, and pushes the list to the
gateways, whose listener refuses a client certificate on it.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
LEAF_DAYS = 397  # a gateway's server certificate
CLIENT_DAYS = 90  # the API's own client certificate, renewed RENEW_BEFORE its end
RENEW_BEFORE = timedelta(days=30)
CRL_DAYS = 90  # the revocation list's nextUpdate; remade CRL_REFRESH before it (OpenSSL refuses an expired one)
CRL_REFRESH = timedelta(days=60)
BACKDATE = timedelta(hours=1)  # a gateway whose clock is a little behind still accepts a fresh certificate
_lock = threading.Lock()


@dataclass(frozen=True)
class IssuedPair:
    cert_pem: str
    key_pem: str
    fingerprint: str
    not_after: float
    serial: str  # hex, what a revocation names


@dataclass(frozen=True)
class FleetFiles:
    ca: Path
    ca_key: Path
    client_cert: Path
    client_key: Path
    crl: Path


def files(data_dir: Path) -> FleetFiles:
    d = data_dir / "fleet"
    return FleetFiles(d / "ca.pem", d / "ca.key", d / "client.pem", d / "client.key", d / "crl.pem")


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
    days: int,
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
        .not_valid_after(now + timedelta(days=days))
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


def _ca(f: FleetFiles) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    ca = x509.load_pem_x509_certificate(f.ca.read_bytes())
    ca_key = serialization.load_pem_private_key(f.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    return ca, ca_key


def _renew_client_if_due(f: FleetFiles) -> None:
    """A new client pair once the current one is within RENEW_BEFORE of its end (the gateways take any client
    certificate of the CA, so the change needs nothing from them). Caller holds _lock."""
    current = x509.load_pem_x509_certificate(f.client_cert.read_bytes())
    if current.not_valid_after_utc - datetime.now(UTC) > RENEW_BEFORE:
        return
    ca, ca_key = _ca(f)
    client, client_key = _leaf(ca, ca_key, "perigee-api", [], ExtendedKeyUsageOID.CLIENT_AUTH, CLIENT_DAYS)
    _write_private(f.client_key, _key_pem(client_key))
    f.client_cert.write_bytes(client.public_bytes(serialization.Encoding.PEM))


def ensure(data_dir: Path) -> FleetFiles:
    """The CA and the API's client pair, created on first use; the client pair renewed when due."""
    f = files(data_dir)
    with _lock:
        if f.ca.exists() and f.ca_key.exists() and f.client_cert.exists() and f.client_key.exists():
            _renew_client_if_due(f)
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
        client, client_key = _leaf(ca, ca_key, "perigee-api", [], ExtendedKeyUsageOID.CLIENT_AUTH, CLIENT_DAYS)
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
    ca, ca_key = _ca(f)
    cert, key = _leaf(
        ca, ca_key, f"perigee-gateway {name}", [san_for(host)], ExtendedKeyUsageOID.SERVER_AUTH, LEAF_DAYS
    )
    return IssuedPair(
        cert_pem=cert.public_bytes(serialization.Encoding.PEM).decode(),
        key_pem=_key_pem(key).decode(),
        fingerprint=cert.fingerprint(hashes.SHA256()).hex(":").upper(),
        not_after=cert.not_valid_after_utc.timestamp(),
        serial=f"{cert.serial_number:x}",
    )


@dataclass(frozen=True)
class Revoked:
    serial: str  # hex
    revoked_at: float


def _crl_is_current(path: Path, serials: set[int]) -> bool:
    try:
        crl = x509.load_pem_x509_crl(path.read_bytes())
    except (OSError, ValueError):
        return False
    due = crl.next_update_utc
    return due is not None and due - datetime.now(UTC) > CRL_REFRESH and {r.serial_number for r in crl} == serials


def crl_pem(data_dir: Path, revoked: Sequence[Revoked] = ()) -> str:
    """The CA's revocation list naming exactly `revoked`: crl.pem, remade when it names others or nears its
    nextUpdate (signed by the CA, with its CRL number and the CA's key identifier, as RFC 5280 wants)."""
    f = ensure(data_dir)
    serials = {int(r.serial, 16) for r in revoked}
    with _lock:
        if _crl_is_current(f.crl, serials):
            return f.crl.read_text()
        ca, ca_key = _ca(f)
        now = datetime.now(UTC)
        b = (
            x509.CertificateRevocationListBuilder()
            .issuer_name(ca.subject)
            .last_update(now - BACKDATE)
            .next_update(now + timedelta(days=CRL_DAYS))
            .add_extension(x509.CRLNumber(int(now.timestamp() * 1000)), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        )
        for r in revoked:
            b = b.add_revoked_certificate(
                x509.RevokedCertificateBuilder()
                .serial_number(int(r.serial, 16))
                .revocation_date(datetime.fromtimestamp(r.revoked_at, UTC))
                .build()
            )
        pem = b.sign(ca_key, hashes.SHA384()).public_bytes(serialization.Encoding.PEM)
        tmp = f.crl.with_suffix(".tmp")
        tmp.write_bytes(pem)
        os.replace(tmp, f.crl)
        return pem.decode()


def client_context(data_dir: Path, revoked: Sequence[Revoked] = ()) -> ssl.SSLContext:
    """What the API dials gateways with: TLS 1.3, the fleet CA as the only trust anchor, its client pair, and
    the revocation list (a removed gateway's certificate is refused)."""
    crl_pem(data_dir, revoked)
    f = ensure(data_dir)
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(f.ca))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_verify_locations(cafile=str(f.crl))
    ctx.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    ctx.load_cert_chain(str(f.client_cert), str(f.client_key))
    return ctx
