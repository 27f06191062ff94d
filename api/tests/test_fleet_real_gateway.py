"""The fleet with the real gateway daemon on the far end: it serves the control protocol over TCP with mutual
TLS using the credentials the API issued at registration, refuses clients without a fleet certificate, and
takes a config version the API applies to the fleet.

The daemon runs in its own network namespace `pf-gw` (prefix pf-) behind a veth pair, 10.79.9.1/30 on this
side and 10.79.9.2/30 in there; it needs root and a built gateway, and runs from `make -C api test-real-gateway`
(PERIGEE_TEST_FLEET_REAL=1) under the namespace test lock."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID
from fastapi.testclient import TestClient

from perigee_api.models import FleetRevocation
from perigee_api.services import fleet_pki
from perigee_control.client import GatewayClient, GatewayError
from perigee_fakes.fake_gateway import FakeGateway
from perigee_fakes.lab_config import lab_config
from satlab.testing import HUNG_S, cannot_run

REPO = Path(__file__).resolve().parents[2]
PERIGEE = REPO / "gateway" / "target" / "release" / "perigee"
NS = "pf-gw"
HOST_IF, GW_IP, HOST_IP, PORT = "pf-h0", "10.79.9.2", "10.79.9.1", 7443


pytestmark = [
    pytest.mark.skipif(
        os.environ.get("PERIGEE_TEST_FLEET_REAL") != "1",
        reason="set PERIGEE_TEST_FLEET_REAL=1 (make -C api test-real-gateway) to run the real daemon in a namespace",
    ),
    pytest.mark.needs_root("a network namespace for the daemon"),
]


@pytest.fixture(autouse=True, scope="module")
def daemon_built() -> None:
    if not PERIGEE.exists():
        cannot_run(f"{PERIGEE} not built (make -C gateway build)")


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def teardown_ns() -> None:
    subprocess.run(["ip", "netns", "del", NS], capture_output=True, timeout=10)
    subprocess.run(["ip", "link", "del", HOST_IF], capture_output=True, timeout=10)


@pytest.fixture
def namespace() -> Iterator[None]:
    teardown_ns()
    ip("netns", "add", NS)
    ip("link", "add", HOST_IF, "type", "veth", "peer", "name", "lan0", "netns", NS)
    ip("addr", "add", f"{HOST_IP}/30", "dev", HOST_IF)
    ip("link", "set", HOST_IF, "up")
    for cmd in (
        ["link", "set", "lo", "up"],
        ["addr", "add", f"{GW_IP}/30", "dev", "lan0"],
        ["addr", "add", "10.71.3.1/24", "dev", "lan0"],
        ["link", "set", "lan0", "up"],
        ["link", "add", "sat0", "type", "veth", "peer", "name", "sat1"],
        ["addr", "add", "10.71.2.2/24", "dev", "sat0"],
        ["addr", "add", "fd71:2::2/64", "dev", "sat0", "nodad"],
        ["addr", "add", "fd71:3::1/64", "dev", "lan0", "nodad"],
        ["link", "set", "sat0", "up"],
        ["link", "set", "sat1", "up"],
    ):
        ip("-n", NS, *cmd)
    try:
        yield
    finally:
        teardown_ns()


def start_daemon(tmp: Path, creds: dict[str, str], *, config: bool = True) -> subprocess.Popen[bytes]:
    """The daemon with the issued credentials (and a revocation list kept in tmp/fleet.crl); `config`: started
    with the default hub config, else with none (a new box: the TLS listener serves all the same)."""
    for name in ("ca_pem", "cert_pem", "key_pem"):
        (tmp / f"{name}.pem").write_text(creds[name])
    (tmp / "key_pem.pem").chmod(0o600)
    cfg = lab_config("hub").to_json()
    cfg["revision"] = "boot"
    (tmp / "gateway.json").write_text(json.dumps(cfg))
    argv = [
        str(PERIGEE),
        "gateway",
        "run",
        *(["--config", str(tmp / "gateway.json")] if config else []),
        "--control-socket",
        str(tmp / "control.sock"),
        "--workers",
        "1",
        "--metrics",
        "off",
        "--squid-state-dir",
        str(tmp / "squid"),
        "--squid-run-dir",
        str(tmp / "squid-run"),
        "--dns-state-dir",
        str(tmp / "dns"),
        "--dns-run-dir",
        str(tmp / "dns-run"),
        "--control-tls-listen",
        f"{GW_IP}:{PORT}",
        "--control-tls-cert",
        str(tmp / "cert_pem.pem"),
        "--control-tls-key",
        str(tmp / "key_pem.pem"),
        "--control-tls-ca",
        str(tmp / "ca_pem.pem"),
        "--control-tls-crl",
        str(tmp / "fleet.crl"),
    ]
    log = open(tmp / "gateway.log", "wb")  # noqa: SIM115 (the daemon holds it until it exits)
    proc = subprocess.Popen(["nsenter", f"--net=/run/netns/{NS}", "--", *argv], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + HUNG_S
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"gateway exited {proc.returncode}: {(tmp / 'gateway.log').read_text()[-1500:]}")
        try:
            socket.create_connection((GW_IP, PORT), timeout=0.5).close()
            return proc
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"no TLS listener: {(tmp / 'gateway.log').read_text()[-1500:]}") from None
            time.sleep(0.1)


def stop_daemon(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def test_real_gateway_in_the_fleet(
    admin: TestClient, fake_gw: FakeGateway, namespace: None, tmp_path: Path, settings: object
) -> None:
    r = admin.post("/api/v1/fleet/gateways", json={"name": "gw-real", "address": f"{GW_IP}:{PORT}"})
    assert r.status_code == 201, r.text
    proc = start_daemon(tmp_path, r.json()["credentials"])
    try:
        data_dir = admin.app.state.ctx.settings.data_dir  # type: ignore[attr-defined]
        # The API's client certificate gets in; the gateway's certificate names the registered address.
        good = GatewayClient.over_tls(GW_IP, PORT, fleet_pki.client_context(data_dir), 5)
        h = good.health()
        assert h.config_revision == "boot", h.problems
        # No client certificate, or one another CA issued: the handshake fails, nothing is answered.
        anonymous = ssl.create_default_context(cafile=str(fleet_pki.files(data_dir).ca))
        foreign = ssl.create_default_context(cafile=str(fleet_pki.files(data_dir).ca))
        fleet_pki.ensure(tmp_path / "other")
        other = fleet_pki.files(tmp_path / "other")
        foreign.load_cert_chain(str(other.client_cert), str(other.client_key))
        for ctx in (anonymous, foreign):
            c = GatewayClient.over_tls(GW_IP, PORT, ctx, 5)
            with pytest.raises(GatewayError) as info:
                c.health()
            assert info.value.code == "gateway_unreachable"
        # One version applied to the fleet: the local (fake) gateway and the real one both run it.
        v = admin.post(
            "/api/v1/policy/classes",
            json={
                "name": "web",
                "priority": 100,
                "action": "accelerate",
                "match": {"protocol": "tcp", "dports": ["80"]},
            },
        )
        vid = v.json()["version_id"]
        res = admin.post(f"/api/v1/versions/{vid}/apply").json()
        assert res["ok"] is True, res
        assert [(g["gateway"], g["status"]) for g in res["gateways"]] == [("local", "applied"), ("gw-real", "applied")]
        rows = {g["gateway"]: g for g in admin.get("/api/v1/fleet").json()["gateways"]}
        assert rows["gw-real"]["reachable"] is True and rows["gw-real"]["revision"] == f"v{vid}"
        assert rows["local"]["revision"] == f"v{vid}"
    finally:
        stop_daemon(proc)


def retired_client(data_dir: Path, tmp: Path) -> tuple[ssl.SSLContext, str]:
    """A client certificate of the fleet CA other than the API's current one (a renewed API's previous
    identity): a TLS context presenting it, and its serial (hex)."""
    f = fleet_pki.ensure(data_dir)
    ca, ca_key = fleet_pki._ca(f)
    cert, key = fleet_pki._leaf(ca, ca_key, "perigee-api (retired)", [], ExtendedKeyUsageOID.CLIENT_AUTH, 30)
    (tmp / "retired.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp / "retired.key").write_bytes(fleet_pki._key_pem(key))
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(f.ca))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(str(tmp / "retired.pem"), str(tmp / "retired.key"))
    return ctx, f"{cert.serial_number:x}"


def as_client(ctx: ssl.SSLContext) -> str:
    try:
        return GatewayClient.over_tls(GW_IP, PORT, ctx, 5).health().version
    except GatewayError as exc:
        return exc.code


def test_the_real_listener_refuses_a_certificate_the_fleet_ca_revoked(
    admin: TestClient, fake_gw: FakeGateway, namespace: None, tmp_path: Path
) -> None:
    """Removing a gateway pushes the fleet CA's revocation list: the real daemon's listener then refuses every
    client certificate on it (here a retired API identity, revoked beside the removed gateway), keeps the list
    across a restart, and still lets the API's current certificate in. The removed gateway's own certificate is
    refused as a client anyway (it is a server certificate)."""
    real = admin.post("/api/v1/fleet/gateways", json={"name": "gw-real", "address": f"{GW_IP}:{PORT}"}).json()
    gone = admin.post("/api/v1/fleet/gateways", json={"name": "gw-gone", "address": "10.79.9.3:7443"}).json()
    ctx = admin.app.state.ctx  # type: ignore[attr-defined]
    data_dir = ctx.settings.data_dir
    retired, serial = retired_client(data_dir, tmp_path)
    (tmp_path / "gone.pem").write_text(gone["credentials"]["cert_pem"])
    (tmp_path / "gone.key").write_text(gone["credentials"]["key_pem"])
    gone_ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(fleet_pki.files(data_dir).ca))
    gone_ctx.load_cert_chain(str(tmp_path / "gone.pem"), str(tmp_path / "gone.key"))
    current = fleet_pki.client_context(data_dir)
    proc = start_daemon(tmp_path, real["credentials"], config=False)
    try:
        version = as_client(current)
        assert version not in ("gateway_unreachable", "gateway_bad_answer"), version
        assert as_client(retired) == version, "not revoked yet: the fleet CA's certificate gets in"
        assert as_client(gone_ctx) == "gateway_unreachable", "a server certificate is no client certificate"

        with ctx.db.session() as db:
            db.add(
                FleetRevocation(
                    serial=serial,
                    subject="perigee-api (retired)",
                    revoked_at=time.time(),
                    not_after=time.time() + 86400,
                )
            )
            db.commit()
        r = admin.delete(f"/api/v1/fleet/gateways/{gone['gateway']['id']}")
        assert r.status_code == 200, r.text
        pushed = {p["gateway"]: p for p in r.json()["pushed"]}
        assert pushed["gw-real"]["ok"] and pushed["gw-real"]["persisted"], pushed

        assert as_client(retired) == "gateway_unreachable"
        assert as_client(current) == version
        stop_daemon(proc)
        proc = start_daemon(tmp_path, real["credentials"], config=False)
        assert as_client(retired) == "gateway_unreachable", "the list was kept across the restart"
        assert as_client(current) == version
    finally:
        stop_daemon(proc)
