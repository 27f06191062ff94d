"""PUT/GET /api/v1/system/tls: an uploaded certificate is validated entirely, then written for nginx."""

from __future__ import annotations

import stat
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from fastapi.testclient import TestClient

from perigee_api.core.config import Settings
from perigee_fakes.fake_gateway import FakeGateway
from tests.certs import Key, cert_pem, certificate, key_pem, make_key
from tests.conftest import make_settings

TLS = "/api/v1/system/tls"


def make_cert(
    key: Key,
    name: str = "gw.example.net",
    days: tuple[int, int] = (-1, 90),
    issuer_key: Key | None = None,
    issuer_name: str | None = None,
) -> x509.Certificate:
    """What an operator uploads: `name` and a documentation address as SANs, valid `days` around today."""
    return certificate(
        key,
        name,
        not_before=timedelta(days=days[0]),
        not_after=timedelta(days=days[1]),
        sans=(name, "192.0.2.7"),
        issuer_key=issuer_key,
        issuer_name=issuer_name,
    )


def fp(cert: x509.Certificate) -> str:
    return cert.fingerprint(hashes.SHA256()).hex(":").upper()


@pytest.fixture
def tls_dir(tmp_path: Path) -> Path:
    """nginx's directory as the web side leaves it at first start: a generated self-signed pair."""
    d = tmp_path / "tls"
    d.mkdir(mode=0o700)
    key = make_key()
    (d / "key.pem").write_text(key_pem(key))
    (d / "key.pem").chmod(0o600)
    (d / "cert.pem").write_text(cert_pem(make_cert(key, "perigee-firstboot")))
    return d


@pytest.fixture
def settings(tmp_path: Path, fake_gw: FakeGateway, tls_dir: Path) -> Settings:
    return make_settings(tmp_path / "data", fake_gw.socket_path, tls_dir=tls_dir, max_tls_pem_bytes=16 * 1024)


def snapshot(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def put(client: TestClient, certificate: str, private_key: str) -> Any:
    return client.put(TLS, json={"certificate": certificate, "private_key": private_key})


def test_get_reports_the_generated_certificate(viewer: TestClient) -> None:
    r = viewer.get(TLS)
    assert r.status_code == 200, r.text
    body = r.json()
    cert = body["certificate"]
    assert cert["subject"] == "CN=perigee-firstboot" and cert["issuer"] == "CN=perigee-firstboot"
    assert cert["self_signed"] is True and cert["source"] == "generated"
    assert cert["sans"] == ["DNS:perigee-firstboot", "IP:192.0.2.7"]
    assert cert["key_type"] == "EC P-256" and cert["chain_length"] == 1
    assert cert["not_before"] < cert["not_after"]
    assert body["reload"]["state"] == "none" and body["backup_available"] is False


def test_the_key_pin_is_what_openssl_makes_of_the_served_certificate(viewer: TestClient, tls_dir: Path) -> None:
    """The pin a terminal gives to join (docs/operations.md), against openssl's own digest of the key."""
    pem = (tls_dir / "cert.pem").read_bytes()
    pub = subprocess.run(["openssl", "x509", "-noout", "-pubkey"], input=pem, capture_output=True, check=True).stdout
    der = subprocess.run(
        ["openssl", "pkey", "-pubin", "-outform", "DER"], input=pub, capture_output=True, check=True
    ).stdout
    digest = (
        subprocess.run(["openssl", "dgst", "-sha256", "-r"], input=der, capture_output=True, check=True)
        .stdout.split()[0]
        .decode()
    )
    assert viewer.get(TLS).json()["certificate"]["spki_pin"] == f"sha256:{digest}"


def test_valid_pair_is_written_backed_up_and_reported(admin: TestClient, tls_dir: Path) -> None:
    before = snapshot(tls_dir)
    ca_key, key = make_key("rsa2048"), make_key("ec256")
    ca = make_cert(ca_key, "Example CA", days=(-10, 3650))
    leaf = make_cert(key, "gw.example.net", issuer_key=ca_key, issuer_name="Example CA")
    r = put(admin, cert_pem(leaf, ca), key_pem(key))
    assert r.status_code == 200, r.text
    body = r.json()
    cert = body["certificate"]
    assert cert["fingerprint_sha256"] == fp(leaf)
    assert cert["self_signed"] is False and cert["source"] == "uploaded" and cert["uploaded_by"] == "admin"
    assert cert["issuer"] == "CN=Example CA" and cert["chain_length"] == 2
    assert body["reload"]["state"] == "pending" and body["backup_available"] is True

    assert stat.S_IMODE((tls_dir / "key.pem").stat().st_mode) == 0o600
    assert stat.S_IMODE((tls_dir / "key.pem.prev").stat().st_mode) == 0o600
    assert stat.S_IMODE((tls_dir / "cert.pem").stat().st_mode) == 0o644
    assert (tls_dir / "cert.pem").read_text() == cert_pem(leaf, ca)
    assert (tls_dir / "cert.pem.prev").read_bytes() == before["cert.pem"]
    assert (tls_dir / "key.pem.prev").read_bytes() == before["key.pem"]
    loaded = serialization.load_pem_private_key((tls_dir / "key.pem").read_bytes(), None)
    assert loaded.public_key() == key.public_key()
    assert (tls_dir / "reload-request").read_text().strip() == fp(leaf)
    assert not [p for p in tls_dir.iterdir() if p.name.startswith(".")], "temporary files left behind"

    # GET shows the new fingerprint; once the web side reports, the reload state follows it.
    assert admin.get(TLS).json()["certificate"]["fingerprint_sha256"] == fp(leaf)
    (tls_dir / "reload-request").unlink()
    (tls_dir / "reload-status").write_text("ok\nnginx reloaded\n")
    assert admin.get(TLS).json()["reload"] == {
        "state": "ok",
        "message": "nginx reloaded",
        "at": pytest.approx((tls_dir / "reload-status").stat().st_mtime),
    }
    audit = admin.get("/api/v1/audit", params={"action": "system/tls"}).json()["entries"]
    assert audit[0]["actor"] == "admin" and audit[0]["result"] == "ok"
    assert audit[0]["detail"]["fingerprint"] == fp(leaf)


def test_certificate_from_a_clock_slightly_ahead_accepted(admin: TestClient) -> None:
    key = make_key()
    cert = make_cert(key, days=(0, 30))
    now = datetime.now(UTC)
    soon = certificate(key, "skewed", not_before=now + timedelta(minutes=10), not_after=now + timedelta(days=30))
    for c in (cert, soon):
        r = put(admin, cert_pem(c), key_pem(key))
        assert r.status_code == 200, r.text


def test_rsa_2048_self_signed_pair_accepted(admin: TestClient) -> None:
    key = make_key("rsa2048")
    r = put(admin, cert_pem(make_cert(key)), key_pem(key))
    assert r.status_code == 200, r.text
    assert r.json()["certificate"]["key_type"] == "RSA 2048"
    assert r.json()["certificate"]["self_signed"] is True


def _refused_cases() -> list[tuple[str, str, str, int]]:
    key, other = make_key(), make_key()
    good = cert_pem(make_cert(key))
    weak, p521 = make_key("rsa1024"), make_key("ec521")
    ca_key = make_key()
    ca = make_cert(ca_key, "CA")
    leaf = make_cert(key, issuer_key=ca_key, issuer_name="CA")
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    ).decode()
    return [
        ("mismatched key", good, key_pem(other), 422),
        ("expired", cert_pem(make_cert(key, days=(-100, -1))), key_pem(key), 422),
        ("not yet valid", cert_pem(make_cert(key, days=(2, 100))), key_pem(key), 422),
        (
            "garbage certificate",
            "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n",
            key_pem(key),
            422,
        ),
        ("no PEM at all", "hello", key_pem(key), 422),
        ("garbage key", good, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", 422),
        ("encrypted key", good, encrypted, 422),
        ("RSA 1024", cert_pem(make_cert(weak)), key_pem(weak), 422),
        ("EC P-521", cert_pem(make_cert(p521)), key_pem(p521), 422),
        ("leaf not first", cert_pem(ca, leaf), key_pem(key), 422),
        ("key inside certificate", good + key_pem(key), key_pem(key), 422),
        ("oversized certificate", good + "\n" * (17 * 1024), key_pem(key), 413),
    ]


CASES = _refused_cases()
FIELD = {
    "mismatched key": "private_key",
    "garbage key": "private_key",
    "encrypted key": "private_key",
    "RSA 1024": "private_key",
    "EC P-521": "private_key",
}


@pytest.mark.parametrize(("case", "certificate", "private_key", "status"), CASES, ids=[c[0] for c in CASES])
def test_refused_and_nothing_written(
    admin: TestClient, tls_dir: Path, case: str, certificate: str, private_key: str, status: int
) -> None:
    before = snapshot(tls_dir)
    r = put(admin, certificate, private_key)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["field"] == FIELD.get(case, "certificate")
    assert err["message"].startswith(err["field"] + ":")
    assert snapshot(tls_dir) == before


def test_body_over_the_request_limit_refused(admin: TestClient, tls_dir: Path) -> None:
    before = snapshot(tls_dir)
    r = put(admin, "x" * (2 * 1024 * 1024), "y")
    assert r.status_code == 413
    assert snapshot(tls_dir) == before


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_only_admin_may_upload(request: pytest.FixtureRequest, tls_dir: Path, role: str) -> None:
    client: TestClient = request.getfixturevalue(role)
    key = make_key()
    before = snapshot(tls_dir)
    r = put(client, cert_pem(make_cert(key)), key_pem(key))
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_role"
    assert snapshot(tls_dir) == before


def test_missing_csrf_refused(admin: TestClient, tls_dir: Path) -> None:
    key = make_key()
    before = snapshot(tls_dir)
    del admin.headers["X-CSRF-Token"]
    r = put(admin, cert_pem(make_cert(key)), key_pem(key))
    assert r.status_code == 403 and r.json()["error"]["code"] == "csrf_failed"
    assert snapshot(tls_dir) == before


def test_missing_directory_is_a_clear_error(admin: TestClient, tls_dir: Path) -> None:
    key = make_key()
    for p in tls_dir.iterdir():
        p.unlink()
    tls_dir.rmdir()
    r = put(admin, cert_pem(make_cert(key)), key_pem(key))
    assert r.status_code == 500 and r.json()["error"]["code"] == "tls_write_failed"
    assert str(tls_dir) in r.json()["error"]["message"]
    assert not tls_dir.exists()
    assert admin.get(TLS).json()["certificate"] is None
