"""The fleet: gateways registered by address, reached over mutual TLS with the fleet CA's certificates, one
config version applied to all (rolled back on the ones that applied when another fails), status and live
flows from all, each labelled, and Prometheus' file-based service discovery kept current.

The remote members are fake gateways serving the control protocol on 127.0.0.1 with TLS that requires a
client certificate from the fleet CA (test_fleet_real_gateway.py does the same with the real daemon)."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from fastapi import FastAPI
from fastapi.testclient import TestClient

from perigee_api.core.config import Settings
from perigee_api.services import fleet_pki
from perigee_fakes.fake_gateway import FakeGateway, FakeTls, make_flow

REPO = Path(__file__).resolve().parents[2]
WEB = {"name": "web", "priority": 100, "action": "accelerate", "match": {"protocol": "tcp", "dports": ["80"]}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Remote:
    id: int
    name: str
    gw: FakeGateway
    files: FakeTls


def write_credentials(d: Path, creds: dict[str, str]) -> tuple[Path, Path, Path]:
    d.mkdir(parents=True, exist_ok=True)
    ca, cert, key = d / "ca.pem", d / "cert.pem", d / "key.pem"
    ca.write_text(creds["ca_pem"])
    cert.write_text(creds["cert_pem"])
    key.write_text(creds["key_pem"])
    return ca, cert, key


def register(admin: TestClient, tmp: Path, name: str) -> Remote:
    port = free_port()
    r = admin.post("/api/v1/fleet/gateways", json={"name": name, "address": f"127.0.0.1:{port}"})
    assert r.status_code == 201, r.text
    body = r.json()
    ca, cert, key = write_credentials(tmp / name, body["credentials"])
    files = FakeTls("127.0.0.1", port, cert, key, ca)
    gw = FakeGateway(tmp / f"{name}.unused", tls=files).start()
    return Remote(body["gateway"]["id"], name, gw, files)


@pytest.fixture
def remotes(admin: TestClient, tmp_path: Path) -> Iterator[list[Remote]]:
    rs = [register(admin, tmp_path, "gw-a"), register(admin, tmp_path, "gw-b")]
    yield rs
    for r in rs:
        r.gw.stop()


def new_version(client: TestClient) -> int:
    r = client.post("/api/v1/policy/classes", json={**WEB, "name": f"web{free_port()}"})
    assert r.status_code in (200, 201), r.text
    return int(r.json()["version_id"])


def test_apply_reaches_every_gateway_with_a_result_each(
    admin: TestClient, fake_gw: FakeGateway, remotes: list[Remote]
) -> None:
    v = new_version(admin)
    r = admin.post(f"/api/v1/versions/{v}/apply").json()
    assert r["ok"] is True, r
    assert [(g["gateway"], g["status"], g["revision"]) for g in r["gateways"]] == [
        ("local", "applied", f"v{v}"),
        ("gw-a", "applied", f"v{v}"),
        ("gw-b", "applied", f"v{v}"),
    ]
    assert fake_gw.revision == remotes[0].gw.revision == remotes[1].gw.revision == f"v{v}"
    stored = admin.get(f"/api/v1/versions/{v}").json()
    assert [g["status"] for g in stored["apply_result"]["gateways"]] == ["applied"] * 3


def test_a_gateway_that_cannot_keep_the_config_says_so_and_the_apply_stands(
    admin: TestClient, fake_gw: FakeGateway, remotes: list[Remote]
) -> None:
    v = new_version(admin)
    remotes[0].gw.persist_error = "cannot write /etc/perigee/gateway.json: Read-only file system (os error 30)"
    r = admin.post(f"/api/v1/versions/{v}/apply").json()
    assert r["ok"] is True, r
    by = {g["gateway"]: g for g in r["gateways"]}
    assert (by["local"]["persisted"], by["local"]["persist_error"]) == (True, None)
    assert by["gw-a"]["status"] == "applied" and by["gw-a"]["persisted"] is False
    assert "Read-only file system" in by["gw-a"]["persist_error"]
    assert remotes[0].gw.revision == f"v{v}"
    assert admin.get("/api/v1/versions").json()["active_version_id"] == v
    stored = admin.get(f"/api/v1/versions/{v}").json()["apply_result"]["gateways"]
    assert [g["persisted"] for g in stored] == [True, False, True]


def test_one_failure_rolls_back_the_ones_that_applied(
    admin: TestClient, fake_gw: FakeGateway, remotes: list[Remote]
) -> None:
    v1 = new_version(admin)
    assert admin.post(f"/api/v1/versions/{v1}/apply").json()["ok"] is True
    v2 = new_version(admin)
    remotes[1].gw.fail_next_apply("nft")
    r = admin.post(f"/api/v1/versions/{v2}/apply").json()
    assert r["ok"] is False
    by = {g["gateway"]: g for g in r["gateways"]}
    assert by["local"]["status"] == by["gw-a"]["status"] == "rolled_back"
    assert by["gw-b"]["status"] == "failed" and by["gw-b"]["error"]["code"] == "apply_failed"
    assert r["error"]["code"] == "apply_failed"
    # Every member runs v1 again, and v1 stays the active version.
    assert fake_gw.revision == remotes[0].gw.revision == remotes[1].gw.revision == f"v{v1}"
    assert [c["revision"] for c in remotes[0].gw.applied] == [f"v{v1}", f"v{v2}", f"v{v1}"]
    assert admin.get("/api/v1/versions").json()["active_version_id"] == v1
    assert admin.get(f"/api/v1/versions/{v2}").json()["apply_status"] == "failed"


def test_an_unreachable_member_stops_the_apply_before_anything_changes(
    admin: TestClient, fake_gw: FakeGateway, remotes: list[Remote]
) -> None:
    v1 = new_version(admin)
    assert admin.post(f"/api/v1/versions/{v1}/apply").json()["ok"] is True
    remotes[0].gw.stop()
    v2 = new_version(admin)
    r = admin.post(f"/api/v1/versions/{v2}/apply").json()
    assert r["ok"] is False
    by = {g["gateway"]: g["status"] for g in r["gateways"]}
    assert by == {"local": "not_attempted", "gw-a": "unreachable", "gw-b": "not_attempted"}
    assert fake_gw.revision == remotes[1].gw.revision == f"v{v1}"
    assert len(fake_gw.applied) == 1


def test_a_gateway_without_a_fleet_certificate_is_not_trusted(
    admin: TestClient, fake_gw: FakeGateway, tmp_path: Path
) -> None:
    """A listener at the registered address whose certificate another CA issued: the API refuses to talk."""
    port = free_port()
    r = admin.post("/api/v1/fleet/gateways", json={"name": "gw-x", "address": f"127.0.0.1:{port}"})
    assert r.status_code == 201
    other = fleet_pki.issue_server(tmp_path / "other-ca", "gw-x", "127.0.0.1")
    (tmp_path / "x").mkdir()
    cert, key = tmp_path / "x" / "cert.pem", tmp_path / "x" / "key.pem"
    cert.write_text(other.cert_pem)
    key.write_text(other.key_pem)
    impostor = FakeGateway(
        tmp_path / "x.unused", tls=FakeTls("127.0.0.1", port, cert, key, fleet_pki.files(tmp_path / "other-ca").ca)
    ).start()
    try:
        rows = {g["gateway"]: g for g in admin.get("/api/v1/fleet").json()["gateways"]}
        assert rows["gw-x"]["reachable"] is False
        assert "CERTIFICATE_VERIFY_FAILED" in rows["gw-x"]["error"]["message"]
        v = new_version(admin)
        r = admin.post(f"/api/v1/versions/{v}/apply").json()
        assert r["ok"] is False and impostor.applied == [] and fake_gw.applied == []
    finally:
        impostor.stop()


def test_the_fleet_gateway_refuses_a_client_without_the_fleet_certificate(
    admin: TestClient, remotes: list[Remote], settings: Settings
) -> None:
    """What the registered gateway is told to require: a client certificate from the fleet CA."""
    f = remotes[0].files
    url = f"https://127.0.0.1:{f.port}/v1/health"
    anonymous = ssl.create_default_context(cafile=str(f.client_ca))
    with pytest.raises(httpx.HTTPError):
        httpx.get(url, verify=anonymous, trust_env=False)
    assert httpx.get(url, verify=fleet_pki.client_context(settings.data_dir), trust_env=False).status_code == 200


def test_status_and_flows_from_all_gateways_each_labelled(
    admin: TestClient, viewer: TestClient, fake_gw: FakeGateway, remotes: list[Remote]
) -> None:
    fake_gw.live_flows = [make_flow(1, rate_down_bps=2e6)]
    remotes[0].gw.live_flows = [make_flow(2, rate_down_bps=1e6), make_flow(3, rate_down_bps=3e6)]
    remotes[1].gw.stop()
    v = viewer.get("/api/v1/fleet").json()
    rows = {g["gateway"]: g for g in v["gateways"]}
    assert list(rows) == ["local", "gw-a", "gw-b"]
    assert rows["gw-a"]["reachable"] is True and rows["gw-a"]["flows_live"] == 2
    assert rows["gw-a"]["throughput_down_bps"] == 4e6
    assert rows["local"]["flows_live"] == 1
    assert rows["gw-b"]["reachable"] is False and rows["gw-b"]["status"] == "unreachable"
    flows = viewer.get("/api/v1/fleet/flows").json()
    assert sorted((f["id"], f["gateway"]) for f in flows["flows"]) == [(1, "local"), (2, "gw-a"), (3, "gw-a")]
    assert [e["gateway"] for e in flows["errors"]] == ["gw-b"]


def bgp_session(address: str, host: str, state: str = "Established", bfd: str = "up") -> dict[str, Any]:
    """One neighbor of a gateway's GET /v1/routing, as the daemon reads it from FRR."""
    up = state == "Established"
    return {
        "address": address,
        "hostname": host,
        "remote_as": 65001,
        "local_as": 65100,
        "state": state,
        "admin_shutdown": state == "Idle",
        "uptime_s": 120.0 if up else None,
        "prefixes_received": 1 if up else 0,
        "prefixes_sent": 3 if up else 0,
        "last_reset": None if up else "Admin. shutdown",
        "last_reset_age_s": None if up else 4.0,
        "bfd_configured": True,
        "bfd": {
            "peer": address,
            "local": None,
            "interface": "sat0",
            "status": bfd,
            "status_age_s": 118,
            "diagnostic": "ok",
            "remote_diagnostic": "ok",
            "receive_interval_ms": 200,
            "transmit_interval_ms": 200,
            "detect_multiplier": 4,
        },
    }


def test_status_carries_each_gateways_bgp_and_bfd_sessions(
    viewer: TestClient, fake_gw: FakeGateway, remotes: list[Remote]
) -> None:
    established = bgp_session("10.71.11.1", "hub")
    shut = bgp_session("10.71.21.1", "edge", state="Idle")
    remotes[0].gw.routing = {
        "available": True,
        "reason": None,
        "vty_dir": "/var/run/frr",
        "neighbors": [established, shut],
        "problems": ["BGP session to 10.71.21.1 (edge) is Idle (admin shutdown)"],
    }
    remotes[1].gw.routing = None  # a daemon from before GET /v1/routing
    rows = {g["gateway"]: g for g in viewer.get("/api/v1/fleet").json()["gateways"]}
    # The local gateway has no FRR beside it: the normal single-box case, not an error.
    assert rows["local"]["routing"]["available"] is False
    assert "bgpd.vty does not exist" in rows["local"]["routing"]["reason"]
    assert rows["local"]["routing_error"] is None
    a = rows["gw-a"]["routing"]
    assert a["available"] is True and a["neighbors"] == [established, shut]
    assert a["problems"] == ["BGP session to 10.71.21.1 (edge) is Idle (admin shutdown)"]
    assert rows["gw-b"]["reachable"] is True and rows["gw-b"]["routing"] is None
    assert rows["gw-b"]["routing_error"]["code"] == "not_found"
    # An unreachable gateway shows its error once, as before: no second one for its routing.
    remotes[1].gw.stop()
    b = next(g for g in viewer.get("/api/v1/fleet").json()["gateways"] if g["gateway"] == "gw-b")
    assert b["reachable"] is False and b["error"]["code"] == "gateway_unreachable"
    assert b["routing"] is None and b["routing_error"] is None


def test_prometheus_file_sd_follows_the_registry(admin: TestClient, remotes: list[Remote], settings: Settings) -> None:
    groups = json.loads(settings.sd_file.read_text())
    assert groups == [
        {"targets": ["127.0.0.1:9464"], "labels": {"gateway": "local"}},
        {"targets": ["127.0.0.1:9464"], "labels": {"gateway": "gw-a"}},
        {"targets": ["127.0.0.1:9464"], "labels": {"gateway": "gw-b"}},
    ]
    assert admin.delete(f"/api/v1/fleet/gateways/{remotes[0].id}").status_code == 200
    assert [g["labels"]["gateway"] for g in json.loads(settings.sd_file.read_text())] == ["local", "gw-b"]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"name": "local", "address": "10.0.0.1:7443"}, 422, "invalid_name"),
        ({"name": "Bad_Name", "address": "10.0.0.1:7443"}, 422, "invalid_name"),
        ({"name": "gw-c", "address": "10.0.0.1"}, 422, "invalid_address"),
        ({"name": "gw-c", "address": "10.0.0.1:70000"}, 422, "invalid_address"),
        ({"name": "gw-c", "address": "0.0.0.0:7443"}, 422, "invalid_address"),
        ({"name": "gw-c", "address": "bad host!:7443"}, 422, "invalid_address"),
        ({"name": "gw-a", "address": "10.0.0.9:7443"}, 409, "gateway_exists"),
        ({"name": "gw-c", "address": "10.0.0.1:7443", "extra": 1}, 422, None),
    ],
)
def test_bad_registrations_change_nothing(
    admin: TestClient, app: FastAPI, body: dict[str, object], status: int, code: str | None
) -> None:
    assert admin.post("/api/v1/fleet/gateways", json={"name": "gw-a", "address": "10.0.0.1:7443"}).status_code == 201
    before = admin.get("/api/v1/fleet/gateways").json()
    r = admin.post("/api/v1/fleet/gateways", json=body)
    assert r.status_code == status, r.text
    if code:
        assert r.json()["error"]["code"] == code
    assert admin.get("/api/v1/fleet/gateways").json() == before


def test_only_an_admin_registers(operator: TestClient, viewer: TestClient) -> None:
    for c in (operator, viewer):
        assert c.post("/api/v1/fleet/gateways", json={"name": "gw-c", "address": "10.0.0.1:7443"}).status_code == 403
    assert viewer.get("/api/v1/fleet/gateways").status_code == 200


def test_prometheus_discovers_the_fleet_the_api_wrote(
    remotes: list[Remote], settings: Settings, tmp_path: Path
) -> None:
    """The shipped scrape config (images/prometheus) reads the API's file: Prometheus' own service discovery
    (promtool) finds one target per gateway, named by the gateway."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool missing (Debian package prometheus): Prometheus' reading of the file not checked")
    shipped = (REPO / "images" / "prometheus" / "prometheus.yml").read_text()
    assert "/var/lib/perigee/prometheus/fleet.json" in shipped
    assert Settings(data_dir=Path("/var/lib/perigee")).sd_file == Path("/var/lib/perigee/prometheus/fleet.json")
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(shipped.replace("/var/lib/perigee/prometheus/fleet.json", str(settings.sd_file)))
    p = subprocess.run(
        [promtool, "check", "service-discovery", "--timeout=5s", str(cfg), "perigee-gateway"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert p.returncode == 0, p.stderr
    found = json.loads(p.stdout)
    assert sorted((t["labels"]["instance"], t["labels"]["__address__"]) for t in found) == [
        ("gw-a", "127.0.0.1:9464"),
        ("gw-b", "127.0.0.1:9464"),
        ("local", "127.0.0.1:9464"),
    ]


def test_a_removed_gateways_certificate_is_revoked_and_refused(
    admin: TestClient, fake_gw: FakeGateway, remotes: list[Remote], tmp_path: Path
) -> None:
    """Removing gw-b revokes its certificate: the list goes to every gateway left, and the API refuses gw-b's
    certificate even where its name would fit (here: gw-a's address, the same host)."""
    gw_a, gw_b = remotes
    rows = {g["gateway"]: g for g in admin.get("/api/v1/fleet").json()["gateways"]}
    assert rows["gw-a"]["reachable"] and rows["gw-b"]["reachable"]
    serial = x509.load_pem_x509_certificate(gw_b.files.cert.read_bytes()).serial_number

    r = admin.delete(f"/api/v1/fleet/gateways/{gw_b.id}")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["revoked"] is True
    assert [(p["gateway"], p["ok"]) for p in body["pushed"]] == [("local", True), ("gw-a", True)]
    for got in (fake_gw.crls, gw_a.gw.crls):
        crl = x509.load_pem_x509_crl(got[-1].encode())
        assert crl.get_revoked_certificate_by_serial_number(serial) is not None
    assert gw_b.gw.crls == []

    # gw-b's pair at gw-a's address: fleet CA, the right host name, and revoked.
    gw_a.gw.stop()
    impostor = FakeGateway(
        tmp_path / "imp.unused",
        tls=FakeTls("127.0.0.1", gw_a.files.port, gw_b.files.cert, gw_b.files.key, gw_b.files.client_ca),
    ).start()
    try:
        rows = {g["gateway"]: g for g in admin.get("/api/v1/fleet").json()["gateways"]}
        assert rows["gw-a"]["reachable"] is False
        assert "revoked" in rows["gw-a"]["error"]["message"]
        v = new_version(admin)
        assert admin.post(f"/api/v1/versions/{v}/apply").json()["ok"] is False
        assert impostor.applied == []
    finally:
        impostor.stop()
    audit = admin.get("/api/v1/audit", params={"limit": 20}).json()["entries"]
    entry = next(e for e in audit if e["action"] == f"DELETE /api/v1/fleet/gateways/{gw_b.id}")
    assert entry["detail"]["revoked"] is True and entry["detail"]["pushed_to"] == ["local", "gw-a"]


def test_a_gateway_certificate_lives_397_days_and_the_api_renews_its_own_client_certificate(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair = fleet_pki.issue_server(settings.data_dir, "gw-x", "127.0.0.1")
    cert = x509.load_pem_x509_certificate(pair.cert_pem.encode())
    assert (cert.not_valid_after_utc - cert.not_valid_before_utc).days == 397
    f = fleet_pki.files(settings.data_dir)
    first = x509.load_pem_x509_certificate(f.client_cert.read_bytes())
    assert (first.not_valid_after_utc - first.not_valid_before_utc).days == 90
    fleet_pki.ensure(settings.data_dir)
    assert f.client_cert.read_bytes() == first.public_bytes(serialization.Encoding.PEM), "not due: kept"
    # Within 30 days of its end: a new pair.
    monkeypatch.setattr(fleet_pki, "RENEW_BEFORE", timedelta(days=91))
    fleet_pki.ensure(settings.data_dir)
    renewed = x509.load_pem_x509_certificate(f.client_cert.read_bytes())
    assert renewed.serial_number != first.serial_number
    assert oct(f.client_key.stat().st_mode & 0o777) == "0o600"


def test_the_revocation_list_is_remade_before_it_expires(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    revoked = [fleet_pki.Revoked("1a2b", 1_700_000_000.0)]
    first = fleet_pki.crl_pem(settings.data_dir, revoked)
    assert fleet_pki.crl_pem(settings.data_dir, revoked) == first, "current: kept"
    crl = x509.load_pem_x509_crl(first.encode())
    assert [r.serial_number for r in crl] == [0x1A2B]
    assert crl.extensions.get_extension_for_class(x509.CRLNumber) is not None
    monkeypatch.setattr(fleet_pki, "CRL_REFRESH", timedelta(days=fleet_pki.CRL_DAYS + 1))
    remade = fleet_pki.crl_pem(settings.data_dir, revoked)
    assert remade != first
    assert fleet_pki.crl_pem(settings.data_dir, []) != remade, "another set of serials: remade"


def test_a_gateway_that_missed_a_removal_gets_the_revocation_list_with_the_next_apply(
    admin: TestClient, fake_gw: FakeGateway, remotes: list[Remote], tmp_path: Path
) -> None:
    gw_a, gw_b = remotes
    gw_a.gw.stop()
    r = admin.delete(f"/api/v1/fleet/gateways/{gw_b.id}").json()
    assert {p["gateway"]: p["ok"] for p in r["pushed"]} == {"local": True, "gw-a": False}
    back = FakeGateway(tmp_path / "a-again.unused", tls=gw_a.files).start()
    try:
        v = new_version(admin)
        assert admin.post(f"/api/v1/versions/{v}/apply").json()["ok"] is True
        serial = x509.load_pem_x509_certificate(gw_b.files.cert.read_bytes()).serial_number
        assert x509.load_pem_x509_crl(back.crls[-1].encode()).get_revoked_certificate_by_serial_number(serial)
    finally:
        back.stop()
