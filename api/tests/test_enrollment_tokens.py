"""Enrollment tokens: an operator makes a one-time token for a terminal's name and prefixes; the terminal redeems it
with its own identity's fingerprint, without a session, and is enrolled (a new config version applied to the
hub's gateways) and told how to reach the hub. Against the fake gateway, as test_terminals.py."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select

from perigee_api.core.config import Settings
from perigee_api.models import EnrollmentToken, LoginAttempt
from perigee_api.services import enrollment, throttle
from perigee_fakes.fake_gateway import FakeGateway
from tests.test_fleet import register
from tests.test_terminals import ALPHA, BRAVO, applied_desired, enroll, fp, running_terminals

TOKENS = "/api/v1/peer/enrollment-tokens"
ENROLL = "/api/v1/peer/enroll"
REFUSED = {"code": "enrollment_refused"}


@pytest.fixture
def hub(operator: TestClient, fake_gw: FakeGateway) -> TestClient:
    applied_desired(operator)
    return operator


def terminal_client(app: FastAPI, address: str = "192.0.2.50") -> TestClient:
    """A terminal: no session, no CSRF cookie, its own TCP peer address."""
    return TestClient(app, base_url="https://testserver", client=(address, 40000))


def make_token(hub: TestClient, name: str = "alpha", prefixes: list[str] | None = None, **kw: Any) -> dict[str, Any]:
    r = hub.post(TOKENS, json={"name": name, "prefixes": prefixes or ["10.71.1.0/24"], **kw})
    assert r.status_code == 201, r.text
    return dict(r.json())


def tokens(client: TestClient) -> dict[str, dict[str, Any]]:
    r = client.get(TOKENS)
    assert r.status_code == 200, r.text
    return {t["name"]: t for t in r.json()["tokens"]}


def state_of(hub: TestClient, fake_gw: FakeGateway) -> tuple[Any, ...]:
    """What a refused redeem must leave as it was."""
    v = hub.get("/api/v1/versions").json()
    return v["total"], v["latest_version_id"], len(fake_gw.applied), running_terminals(fake_gw), tokens(hub)


def refused(r: Any, status: int = 401) -> None:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["code"] == REFUSED["code"] and err["field"] is None and err["details"] is None, err


def test_create_list_and_revoke_a_token(hub: TestClient, admin: TestClient) -> None:
    made = make_token(hub, "alpha", ["10.71.1.0/24", "fd71:1::/64"], comment="site A")
    assert made["token"].startswith("pgt1.") and len(made["token"]) == len("pgt1.") + 43
    assert (made["state"], made["created_by"], made["comment"]) == ("live", "otto", "site A")
    assert 86400 - 5 <= made["expires_at"] - made["created_at"] <= 86400

    listed = tokens(hub)["alpha"]
    assert listed["state"] == "live" and listed["prefixes"] == ["10.71.1.0/24", "fd71:1::/64"]
    assert "token" not in listed and "token_hash" not in listed

    r = hub.delete(f"{TOKENS}/{made['id']}")
    assert r.status_code == 200 and r.json()["state"] == "revoked" and r.json()["revoked_by"] == "otto", r.text
    assert tokens(hub)["alpha"]["state"] == "revoked"
    assert hub.delete(f"{TOKENS}/999").status_code == 404

    actions = [e["action"] for e in admin.get("/api/v1/audit", params={"limit": 20}).json()["entries"]]
    assert f"DELETE {TOKENS}/{made['id']}" in actions and f"POST {TOKENS}" in actions


def test_the_token_is_shown_once_and_stored_only_as_its_hash(hub: TestClient, viewer: TestClient, app: FastAPI) -> None:
    made = make_token(hub)
    secret = made["token"]
    digest = enrollment.token_hash(secret)
    for c in (hub, viewer):
        text = c.get(TOKENS).text
        assert secret not in text and digest not in text and secret.removeprefix("pgt1.") not in text
    with app.state.ctx.db.session() as db:
        row = db.scalars(select(EnrollmentToken)).one()
        assert row.token_hash == digest
        stored = [str(getattr(row, c.name)) for c in EnrollmentToken.__table__.columns]
        assert not any(secret.removeprefix("pgt1.") in s for s in stored)


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        ({"name": "alpha", "prefixes": ["10.71.9.0/24"]}, 409, "terminal_exists", "name"),
        ({"name": "bravo", "prefixes": ["10.71.1.128/25"]}, 422, "prefix_overlap", "prefixes"),
        ({"name": "charlie", "prefixes": ["10.72.0.0/16"]}, 409, "token_exists", "name"),
        ({"name": "delta", "prefixes": ["10.72.1.0/24"]}, 422, "prefix_overlap", "prefixes"),
        ({"name": "echo", "prefixes": ["10.73.0.0/24"], "expires_in_s": 8 * 86400}, 422, "validation_error", None),
        ({"name": "echo", "prefixes": []}, 422, "validation_error", "body.prefixes"),
        ({"name": "bad name!", "prefixes": ["10.73.0.0/24"]}, 422, "validation_error", "body.name"),
    ],
)
def test_a_token_is_checked_as_enrolling_would_be(
    hub: TestClient, body: dict[str, Any], status: int, code: str, field: str | None
) -> None:
    assert enroll(hub, "alpha", ["10.71.1.0/24"], ALPHA).status_code == 201
    make_token(hub, "charlie", ["10.72.0.0/16"])
    before = tokens(hub)
    r = hub.post(TOKENS, json=body)
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code
    if field is not None:
        assert r.json()["error"]["field"] == field
    assert tokens(hub) == before


def test_no_token_without_a_hub_address(hub: TestClient, fake_gw: FakeGateway) -> None:
    fake_gw.interfaces = [n for n in fake_gw.interfaces if n["name"] != "sat0"]
    r = hub.post(TOKENS, json={"name": "alpha", "prefixes": ["10.71.1.0/24"]})
    assert r.status_code == 409, r.text
    err = r.json()["error"]
    assert err["code"] == "hub_address_unknown" and "peer.listen" in err["message"] and err["field"] == "peer.listen"
    assert tokens(hub) == {}


def test_redeeming_enrolls_the_terminal_and_answers_how_to_reach_the_hub(
    hub: TestClient, fake_gw: FakeGateway, app: FastAPI, admin: TestClient
) -> None:
    made = make_token(hub, "alpha", ["10.71.1.0/24", "fd71:1::/64"])
    before = hub.get("/api/v1/versions").json()["latest_version_id"]
    r = terminal_client(app).post(ENROLL, json={"token": made["token"], "fingerprint": ALPHA})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["name"] == "alpha" and body["prefixes"] == ["10.71.1.0/24", "fd71:1::/64"]
    assert body["version_id"] == before + 1
    sat = next(n for n in fake_gw.interfaces if n["name"] == "sat0")["addresses"][0].split("/")[0]
    assert body["peer"] == {
        "enabled": True,
        "port": 7072,
        "hub": sat,
        "hub_fingerprints": [fake_gw.peer.identity.fingerprint],
        "hub_cluster": False,
    }
    # Enrolled, in a version that every gateway runs, by the token.
    assert running_terminals(fake_gw) == [
        {"name": "alpha", "fingerprints": [ALPHA], "prefixes": ["10.71.1.0/24", "fd71:1::/64"]}
    ]
    v = hub.get(f"/api/v1/versions/{body['version_id']}").json()
    assert v["author"] == f"enrollment token {made['id']}" and v["apply_status"] == "applied"
    assert hub.get("/api/v1/peer/terminals").json()["active_version_id"] == body["version_id"]
    t = tokens(hub)["alpha"]
    assert (t["state"], t["used_fingerprint"], t["used_version_id"]) == ("used", ALPHA, body["version_id"])
    assert t["used_at"] is not None

    entry = next(
        e for e in admin.get("/api/v1/audit", params={"limit": 20}).json()["entries"] if e["action"] == f"POST {ENROLL}"
    )
    assert entry["actor"] == f"enrollment token {made['id']}" and entry["result"] == "ok"
    assert entry["detail"]["terminal"] == "alpha" and made["token"] not in str(entry)


def test_the_peer_address_is_peer_listen_when_set(hub: TestClient, fake_gw: FakeGateway, app: FastAPI) -> None:
    cfg = hub.get("/api/v1/config").json()["config"]
    cfg["peer"] = {**cfg.get("peer", {}), "listen": ["198.51.100.7"], "port": 7100}
    r = hub.put("/api/v1/config", json={"config": cfg, "comment": "peer listener"})
    assert r.status_code == 200, r.text
    applied_desired(hub)
    made = make_token(hub)
    r = terminal_client(app).post(ENROLL, json={"token": made["token"], "fingerprint": ALPHA})
    assert r.status_code == 200, r.text
    assert (r.json()["peer"]["hub"], r.json()["peer"]["port"]) == ("198.51.100.7", 7100)


def test_a_hub_cluster_gives_every_gateways_identity(
    hub: TestClient, fake_gw: FakeGateway, app: FastAPI, admin: TestClient, tmp_path: Path
) -> None:
    remotes = [register(admin, tmp_path, "gw-a"), register(admin, tmp_path, "gw-b")]
    try:
        applied_desired(hub)
        made = make_token(hub)
        r = terminal_client(app).post(ENROLL, json={"token": made["token"], "fingerprint": ALPHA})
        assert r.status_code == 200, r.text
        peer = r.json()["peer"]
        assert peer["hub_cluster"] is True
        assert peer["hub_fingerprints"] == [
            fake_gw.peer.identity.fingerprint,
            *(x.gw.peer.identity.fingerprint for x in remotes),
        ]
        for x in remotes:
            assert running_terminals(x.gw)[0]["fingerprints"] == [ALPHA]
    finally:
        for x in remotes:
            x.gw.stop()


def test_a_second_redeem_is_refused_and_changes_nothing(hub: TestClient, fake_gw: FakeGateway, app: FastAPI) -> None:
    made = make_token(hub)
    t = terminal_client(app)
    assert t.post(ENROLL, json={"token": made["token"], "fingerprint": ALPHA}).status_code == 200
    before = state_of(hub, fake_gw)
    for fingerprint in (ALPHA, BRAVO):
        refused(t.post(ENROLL, json={"token": made["token"], "fingerprint": fingerprint}))
    assert state_of(hub, fake_gw) == before


def test_unknown_expired_revoked_and_malformed_tokens_get_one_answer(
    hub: TestClient, fake_gw: FakeGateway, app: FastAPI, admin: TestClient
) -> None:
    revoked = make_token(hub, "alpha", ["10.71.1.0/24"])
    assert hub.delete(f"{TOKENS}/{revoked['id']}").status_code == 200
    expired = make_token(hub, "bravo", ["10.72.1.0/24"], expires_in_s=60)
    with app.state.ctx.db.session() as db:
        row = db.get(EnrollmentToken, expired["id"])
        assert row is not None
        row.expires_at = row.created_at - 1
        db.commit()
    assert tokens(hub)["bravo"]["state"] == "expired"
    unknown = enrollment.new_token()
    before = state_of(hub, fake_gw)
    t = terminal_client(app)
    answers = []
    for i, token in enumerate((revoked["token"], expired["token"], unknown, "pgt1.short", "not a token", "")):
        # each from an address of its own: one address's failures would soon be throttled (429)
        r = terminal_client(app, f"192.0.2.{100 + i}").post(ENROLL, json={"token": token, "fingerprint": ALPHA})
        refused(r)
        answers.append(r.json())
    assert all(a == answers[0] for a in answers)  # not a word on which
    # A malformed request: the same refusal, 400.
    for body in (
        {"fingerprint": ALPHA},
        {"token": 5, "fingerprint": ALPHA},
        {"token": unknown, "fingerprint": ALPHA, "x": 1},
        [1],
    ):
        r = t.post(ENROLL, json=body)
        refused(r, 400)
        assert r.json()["error"]["message"] == answers[0]["error"]["message"]
    refused(t.post(ENROLL, content=b"{not json", headers={"content-type": "application/json"}), 400)
    assert state_of(hub, fake_gw) == before
    # The audit log says which.
    reasons = [
        e["detail"].get("refused")
        for e in admin.get("/api/v1/audit", params={"limit": 50}).json()["entries"]
        if e["action"] == f"POST {ENROLL}" and e["detail"].get("refused")
    ]
    assert {"revoked", "expired", "unknown", "malformed"} <= set(reasons)


def test_a_bad_fingerprint_is_a_422_and_does_not_use_the_token(
    hub: TestClient, fake_gw: FakeGateway, app: FastAPI
) -> None:
    made = make_token(hub)
    t = terminal_client(app)
    for bad in ("sha256:" + "A" * 64, "sha256:abc", "md5:" + "a" * 64):
        r = t.post(ENROLL, json={"token": made["token"], "fingerprint": bad})
        assert r.status_code == 422, r.text
        assert r.json()["error"]["field"] == "body.fingerprint"
    assert tokens(hub)["alpha"]["state"] == "live"
    assert t.post(ENROLL, json={"token": made["token"], "fingerprint": ALPHA}).status_code == 200


def test_a_hub_that_cannot_enroll_now_keeps_the_token(hub: TestClient, fake_gw: FakeGateway, app: FastAPI) -> None:
    made = make_token(hub)
    assert enroll(hub, "bravo", ["10.72.1.0/24"], BRAVO).status_code == 201
    t = terminal_client(app)
    # Its identity is another terminal's: refused, the token stays live for the right one.
    r = t.post(ENROLL, json={"token": made["token"], "fingerprint": BRAVO})
    assert r.status_code == 409 and r.json()["error"]["code"] == "fingerprint_in_use", r.text
    assert tokens(hub)["alpha"]["state"] == "live"
    # A gateway that refuses the apply: nothing changes, the token stays live.
    versions = hub.get("/api/v1/versions").json()["total"]
    fake_gw.fail_next_apply()
    r = t.post(ENROLL, json={"token": made["token"], "fingerprint": ALPHA})
    assert r.status_code == 503 and r.json()["error"]["code"] == "enrollment_not_applied", r.text
    assert hub.get("/api/v1/versions").json()["total"] == versions
    assert tokens(hub)["alpha"]["state"] == "live"
    assert t.post(ENROLL, json={"token": made["token"], "fingerprint": ALPHA}).status_code == 200


def test_two_concurrent_redeems_of_one_token_enroll_once(hub: TestClient, fake_gw: FakeGateway, app: FastAPI) -> None:
    made = make_token(hub)
    applied = len(fake_gw.applied)
    versions = hub.get("/api/v1/versions").json()["total"]
    go = threading.Barrier(4)
    answers: list[int] = []
    lock = threading.Lock()

    def redeem(i: int) -> None:
        t = terminal_client(app, f"192.0.2.{60 + i}")
        go.wait()
        r = t.post(ENROLL, json={"token": made["token"], "fingerprint": fp(f"racer-{i}")})
        with lock:
            answers.append(r.status_code)

    threads = [threading.Thread(target=redeem, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert sorted(answers) == [200, 401, 401, 401], answers
    assert hub.get("/api/v1/versions").json()["total"] == versions + 1
    assert len(fake_gw.applied) == applied + 1
    terminals = running_terminals(fake_gw)
    assert len(terminals) == 1 and terminals[0]["fingerprints"] == [tokens(hub)["alpha"]["used_fingerprint"]]


def test_a_viewer_cannot_create_or_revoke_tokens(hub: TestClient, viewer: TestClient) -> None:
    made = make_token(hub)
    assert viewer.post(TOKENS, json={"name": "bravo", "prefixes": ["10.72.1.0/24"]}).status_code == 403
    assert viewer.delete(f"{TOKENS}/{made['id']}").status_code == 403
    assert set(tokens(viewer)) == {"alpha"}
    assert tokens(hub)["alpha"]["state"] == "live"


def test_token_routes_need_a_session_and_its_csrf_token(hub: TestClient, app: FastAPI) -> None:
    anon = terminal_client(app)
    assert anon.get(TOKENS).status_code == 401
    assert anon.post(TOKENS, json={"name": "alpha", "prefixes": ["10.71.1.0/24"]}).status_code == 403  # CSRF
    csrf = hub.headers.pop("X-CSRF-Token")
    try:
        r = hub.post(TOKENS, json={"name": "alpha", "prefixes": ["10.71.1.0/24"]})
        assert r.status_code == 403 and r.json()["error"]["code"] == "csrf_failed"
    finally:
        hub.headers["X-CSRF-Token"] = csrf


def test_failures_throttle_only_their_own_address(
    hub: TestClient, fake_gw: FakeGateway, app: FastAPI, settings: Settings
) -> None:
    made = make_token(hub)
    attacker = terminal_client(app, "203.0.113.9")
    codes = [
        attacker.post(ENROLL, json={"token": enrollment.new_token(), "fingerprint": ALPHA}).status_code
        for _ in range(settings.login_free_failures + 1)
    ]
    assert codes[: settings.login_free_failures] == [401] * settings.login_free_failures
    assert codes[-1] == 429
    r = attacker.post(ENROLL, json={"token": enrollment.new_token(), "fingerprint": ALPHA})
    assert r.status_code == 429 and r.json()["error"]["code"] == "enrollment_throttled"
    assert int(r.headers["Retry-After"]) >= 1
    # The attacker's failures do not count against logins from its address, nor against anyone else's address.
    with app.state.ctx.db.session() as db:
        assert throttle.check(db, settings, "admin", "203.0.113.9").allowed
        assert throttle.check_enrollment(db, settings, "192.0.2.50").allowed
        assert db.scalar(select(LoginAttempt).where(LoginAttempt.address == "192.0.2.50")) is None
    # The terminal, from its own address, enrolls at once.
    r = terminal_client(app, "192.0.2.50").post(ENROLL, json={"token": made["token"], "fingerprint": ALPHA})
    assert r.status_code == 200, r.text


def test_a_throttled_address_still_redeems_a_live_token(hub: TestClient, app: FastAPI, settings: Settings) -> None:
    """An outsider behind the terminal's own address (a shared NAT) cannot aim its failures at the terminal."""
    made = make_token(hub)
    shared = "198.51.100.20"
    outsider = terminal_client(app, shared)
    for _ in range(settings.login_free_failures + 2):
        outsider.post(ENROLL, json={"token": enrollment.new_token(), "fingerprint": BRAVO})
    assert outsider.post(ENROLL, json={"token": "pgt1.x", "fingerprint": BRAVO}).status_code == 429
    r = terminal_client(app, shared).post(ENROLL, json={"token": made["token"], "fingerprint": ALPHA})
    assert r.status_code == 200, r.text
    # And the success starts the address afresh.
    refused(outsider.post(ENROLL, json={"token": made["token"], "fingerprint": BRAVO}))
