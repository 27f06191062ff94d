"""Terminals enrolled at the hub by their own identity: enroll, see them connect, rotate, revoke; each change a
new config version applied to the gateway. This box's identity and a terminal's hub. Against the fake gateway,
whose peer path admits exactly the identities its running config enrolls (perigee_fakes.fake_peer)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from fastapi.testclient import TestClient

from perigee_fakes.fake_gateway import FakeGateway
from perigee_fakes.lab_config import lab_config


def fp(seed: str) -> str:
    return "sha256:" + hashlib.sha256(seed.encode()).hexdigest()


ALPHA, ALPHA_NEXT, BRAVO = fp("alpha"), fp("alpha-next"), fp("bravo")


def applied_desired(client: TestClient) -> int:
    """Applies the desired config (the first one is only proposed), so changes may follow."""
    vid = client.get("/api/v1/config").json()["id"]
    r = client.post(f"/api/v1/versions/{vid}/apply", json={})
    assert r.status_code == 200 and r.json()["ok"], r.text
    return int(vid)


def enroll(client: TestClient, name: str, prefixes: list[str], fingerprint: str) -> Any:
    return client.post("/api/v1/peer/terminals", json={"name": name, "prefixes": prefixes, "fingerprint": fingerprint})


def listed(client: TestClient) -> dict[str, Any]:
    r = client.get("/api/v1/peer/terminals")
    assert r.status_code == 200, r.text
    return {t["name"]: t for t in r.json()["terminals"]} | {"_": r.json()}


def running_terminals(gw: FakeGateway) -> list[dict[str, Any]]:
    return list((gw.config or {})["peer"]["terminals"])


@pytest.fixture
def hub(operator: TestClient, fake_gw: FakeGateway) -> TestClient:
    applied_desired(operator)
    return operator


def test_enroll_then_its_connections_show_and_an_unknown_identity_is_refused(
    hub: TestClient, fake_gw: FakeGateway, admin: TestClient
) -> None:
    before = hub.get("/api/v1/versions").json()["latest_version_id"]
    r = enroll(hub, "alpha", ["10.71.1.0/24", "fd71:1::/64"], ALPHA)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["version_id"] == before + 1 and body["apply"]["ok"] is True
    assert running_terminals(fake_gw) == [
        {"name": "alpha", "fingerprints": [ALPHA], "prefixes": ["10.71.1.0/24", "fd71:1::/64"]}
    ]
    t = listed(hub)["alpha"]
    assert (t["applied"], t["connected"], t["idle_connections"]) == (True, False, 0)

    fake_gw.peer.dial(ALPHA, idle=6, live=2)
    fake_gw.peer.dial(BRAVO)  # nobody enrolled it
    got = listed(hub)
    assert (got["alpha"]["connected"], got["alpha"]["idle_connections"], got["alpha"]["live_flows"]) == (True, 6, 2)
    assert got["alpha"]["last_seen"] is not None
    assert got["_"]["refused_unknown"] >= 1
    assert got["_"]["active_version_id"] == body["version_id"]

    audit = admin.get("/api/v1/audit", params={"limit": 20}).json()["entries"]
    entry = next(e for e in audit if e["action"] == "POST /api/v1/peer/terminals")
    assert entry["detail"]["terminal"] == "alpha" and entry["detail"]["fingerprint"] == ALPHA


@pytest.mark.parametrize(
    ("name", "prefixes", "fingerprint", "status", "code", "field"),
    [
        ("bravo", ["10.71.1.128/25"], BRAVO, 422, "prefix_overlap", "prefixes"),
        ("bravo", ["10.0.0.0/8"], BRAVO, 422, "prefix_overlap", "prefixes"),
        ("alpha", ["10.9.0.0/16"], BRAVO, 409, "terminal_exists", "name"),
        ("bravo", ["10.9.0.0/16"], ALPHA, 409, "fingerprint_in_use", "fingerprint"),
        ("bravo", ["10.9.0.0/16"], "sha256:" + "A" * 64, 422, "validation_error", "body.fingerprint"),
        ("bravo", ["10.9.0.0/16"], "sha256:abc", 422, "validation_error", "body.fingerprint"),
        ("bravo", ["10.9.0.0/16"], "md5:" + "a" * 64, 422, "validation_error", "body.fingerprint"),
        ("bravo", ["10.9.0.0/33"], BRAVO, 422, "validation_error", "body.prefixes.0"),
        ("bravo", [], BRAVO, 422, "validation_error", "body.prefixes"),
        ("bad name!", ["10.9.0.0/16"], BRAVO, 422, "validation_error", "body.name"),
    ],
)
def test_a_bad_enrollment_is_refused_clearly_and_changes_nothing(
    hub: TestClient,
    fake_gw: FakeGateway,
    name: str,
    prefixes: list[str],
    fingerprint: str,
    status: int,
    code: str,
    field: str,
) -> None:
    assert enroll(hub, "alpha", ["10.71.1.0/24"], ALPHA).status_code == 201
    versions = hub.get("/api/v1/versions").json()["total"]
    applied = len(fake_gw.applied)
    r = enroll(hub, name, prefixes, fingerprint)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert (err["code"], err["field"]) == (code, field), err
    assert hub.get("/api/v1/versions").json()["total"] == versions
    assert len(fake_gw.applied) == applied


def test_rotation_adds_the_next_identity_then_drops_the_old_one(hub: TestClient, fake_gw: FakeGateway) -> None:
    assert enroll(hub, "alpha", ["10.71.1.0/24"], ALPHA).status_code == 201
    r = hub.post("/api/v1/peer/terminals/alpha/fingerprints", json={"fingerprint": ALPHA_NEXT})
    assert r.status_code == 200 and r.json()["apply"]["ok"], r.text
    assert running_terminals(fake_gw)[0]["fingerprints"] == [ALPHA, ALPHA_NEXT]
    # Both identities are let in while it rotates.
    fake_gw.peer.dial(ALPHA, idle=2)
    fake_gw.peer.dial(ALPHA_NEXT, idle=3)
    assert listed(hub)["alpha"]["idle_connections"] == 5

    third = hub.post("/api/v1/peer/terminals/alpha/fingerprints", json={"fingerprint": BRAVO})
    assert third.status_code == 409 and third.json()["error"]["code"] == "rotation_in_progress"

    r = hub.delete(f"/api/v1/peer/terminals/alpha/fingerprints/{ALPHA}")
    assert r.status_code == 200, r.text
    assert running_terminals(fake_gw)[0]["fingerprints"] == [ALPHA_NEXT]
    # Only the dropped identity's connections went.
    assert listed(hub)["alpha"]["idle_connections"] == 3

    last = hub.delete(f"/api/v1/peer/terminals/alpha/fingerprints/{ALPHA_NEXT}")
    assert last.status_code == 409 and last.json()["error"]["code"] == "last_fingerprint"
    gone = hub.delete(f"/api/v1/peer/terminals/alpha/fingerprints/{BRAVO}")
    assert gone.status_code == 404


def test_revoking_closes_its_connections_and_refuses_it_from_then_on(hub: TestClient, fake_gw: FakeGateway) -> None:
    assert enroll(hub, "alpha", ["10.71.1.0/24"], ALPHA).status_code == 201
    assert enroll(hub, "bravo", ["10.72.1.0/24"], BRAVO).status_code == 201
    fake_gw.peer.dial(ALPHA, idle=4, live=1)
    fake_gw.peer.dial(BRAVO, idle=4)
    before = listed(hub)
    assert before["alpha"]["connected"] and before["bravo"]["connected"]
    refused = before["_"]["refused_unknown"]

    r = hub.delete("/api/v1/peer/terminals/alpha")
    assert r.status_code == 200 and r.json()["apply"]["ok"], r.text
    assert [t["name"] for t in running_terminals(fake_gw)] == ["bravo"]
    after = listed(hub)
    assert "alpha" not in after and after["bravo"]["connected"]
    assert after["_"]["refused_unknown"] > refused  # it keeps dialing and is refused
    assert hub.delete("/api/v1/peer/terminals/alpha").status_code == 404


def test_no_change_rides_on_someone_elses_unapplied_one(hub: TestClient, fake_gw: FakeGateway) -> None:
    cfg = hub.get("/api/v1/config").json()["config"]
    cfg["sysctls"]["net.ipv4.tcp_rmem"] = "4096 87380 6291456"
    assert hub.put("/api/v1/config", json={"config": cfg, "comment": "pending"}).status_code == 200
    r = enroll(hub, "alpha", ["10.71.1.0/24"], ALPHA)
    assert r.status_code == 409 and r.json()["error"]["code"] == "unapplied_changes"
    assert fake_gw.config is not None and fake_gw.config["peer"]["terminals"] == []


def test_a_viewer_sees_the_terminals_and_changes_nothing(hub: TestClient, viewer: TestClient) -> None:
    assert enroll(hub, "alpha", ["10.71.1.0/24"], ALPHA).status_code == 201
    assert viewer.get("/api/v1/peer/terminals").json()["terminals"][0]["name"] == "alpha"
    for method, path, body in [
        ("POST", "/api/v1/peer/terminals", {"name": "x", "prefixes": ["10.9.0.0/16"], "fingerprint": BRAVO}),
        ("DELETE", "/api/v1/peer/terminals/alpha", None),
        ("POST", "/api/v1/peer/terminals/alpha/fingerprints", {"fingerprint": BRAVO}),
        ("POST", "/api/v1/peer/identity/rotate", None),
        ("PUT", "/api/v1/peer/hub", {"hub": "10.71.2.2", "hub_fingerprints": [BRAVO]}),
    ]:
        r = viewer.request(method, path, json=body)
        assert r.status_code == 403, (path, r.text)


def test_this_gateways_identity_and_its_rotation(hub: TestClient, fake_gw: FakeGateway) -> None:
    r = hub.get("/api/v1/peer/identity")
    assert r.status_code == 200, r.text
    me = r.json()["identities"][0]
    assert me["gateway"] == "local" and me["fingerprint"] == fake_gw.peer.identity.fingerprint
    assert me["certificate_pem"].startswith("-----BEGIN CERTIFICATE-----") and me["next_fingerprint"] is None
    staged = hub.post("/api/v1/peer/identity/rotate").json()["identities"][0]
    assert staged["fingerprint"] == me["fingerprint"] and staged["next_fingerprint"] not in (None, me["fingerprint"])
    done = hub.post("/api/v1/peer/identity/commit").json()["identities"][0]
    assert (done["fingerprint"], done["next_fingerprint"]) == (staged["next_fingerprint"], None)
    again = hub.post("/api/v1/peer/identity/commit")
    assert again.status_code == 409 and again.json()["error"]["code"] == "nothing_staged"
    assert "PRIVATE" not in hub.get("/api/v1/peer/identity").text


def test_a_terminal_pins_its_hub_and_a_hub_enrolls_no_hub(operator: TestClient, fake_gw: FakeGateway) -> None:
    # A hub has no hub to pin.
    applied_desired(operator)
    r = operator.put("/api/v1/peer/hub", json={"hub": "10.71.2.2", "hub_fingerprints": [BRAVO]})
    assert r.status_code == 409 and r.json()["error"]["code"] == "not_a_terminal"
    # The box becomes a terminal.
    terminal = lab_config("terminal").to_json()
    assert operator.put("/api/v1/config", json={"config": terminal, "comment": "terminal"}).status_code == 200
    applied_desired(operator)
    assert enroll(operator, "alpha", ["10.71.1.0/24"], ALPHA).json()["error"]["code"] == "not_a_hub"
    bad = operator.put("/api/v1/peer/hub", json={"hub": "10.71.2.2", "hub_fingerprints": ["sha256:nothex"]})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "body.hub_fingerprints.0"
    r = operator.put("/api/v1/peer/hub", json={"hub": "10.71.2.2", "hub_fingerprints": [BRAVO, ALPHA]})
    assert r.status_code == 200 and r.json()["apply"]["ok"], r.text
    peer = (fake_gw.config or {})["peer"]
    assert (peer["enabled"], peer["hub"], peer["hub_fingerprints"]) == (True, "10.71.2.2", [BRAVO, ALPHA])
    mine = operator.get("/api/v1/peer/identity").json()
    assert mine["role"] == "terminal" and mine["peer"]["pool"]["hub_fingerprints"] == [BRAVO, ALPHA]
    loop = operator.put("/api/v1/peer/hub", json={"hub": "127.0.0.1", "hub_fingerprints": [BRAVO]})
    assert loop.status_code == 422, loop.text
