"""Terminals managed from the hub, end to end: a real hub API served over HTTPS on loopback (a self-signed
certificate made here, so the terminal's pin is really checked) and a real terminal API in this process, each with
its fake gateway. The terminal joins with an enrollment token, then its poll brings the hub's versions onto it and
reports what became of them."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from cryptography.hazmat.primitives import serialization
from fastapi import FastAPI
from fastapi.testclient import TestClient

from perigee_api.main import create_app
from perigee_api.models import ManagedLink
from perigee_api.services.managed_poll import ManagedPoller
from perigee_fakes.fake_gateway import FakeGateway
from satlab.testing import HUNG_S
from tests.certs import certificate, make_key, write_pair
from tests.conftest import STRONG, login, make_settings, make_user, new_client, one_time_password
from tests.test_fleet import free_port
from tests.test_terminals import applied_desired

TOKENS = "/api/v1/peer/enrollment-tokens"
JOIN = "/api/v1/managed/join"
DESIRED = "/api/v1/managed/desired"
REPORT = "/api/v1/managed/report"
HYBLA = {"rtt0_ms": 30, "base_rtt_ms": 0, "cwnd_max": 0}


def self_signed(directory: Path) -> tuple[Path, Path, str]:
    """A certificate and key for the hub's HTTPS, and its pin (sha256 of its SubjectPublicKeyInfo)."""
    key = make_key()
    cert = certificate(key, "hub", not_before=-timedelta(hours=1), not_after=timedelta(days=2))
    cert_file, key_file = write_pair(directory, key, cert)
    spki = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return cert_file, key_file, "sha256:" + hashlib.sha256(spki).hexdigest()


class Served:
    """An app served by uvicorn over TLS on loopback, in a thread."""

    def __init__(self, app: FastAPI, cert: Path, key: Path) -> None:
        self.port = free_port()
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=self.port,
            ssl_certfile=str(cert),
            ssl_keyfile=str(key),
            log_level="warning",
            lifespan="off",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=lambda: asyncio.run(self.server.serve()), daemon=True)
        self.thread.start()
        deadline = time.monotonic() + HUNG_S
        while not self.server.started:
            assert time.monotonic() < deadline, "the hub's server did not start"
            time.sleep(0.01)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=HUNG_S)


def admin_of(app: FastAPI, data_dir: Path) -> TestClient:
    c = new_client(app)
    otp = one_time_password(app.state.ctx.settings)
    assert login(c, "admin", otp).status_code == 200
    r = c.post("/api/v1/auth/change-password", json={"current_password": otp, "new_password": STRONG})
    assert r.status_code == 200, r.text
    return c


@dataclass
class Pair:
    hub_gw: FakeGateway
    hub_app: FastAPI
    hub: TestClient  # an operator at the hub
    hub_admin: TestClient
    served: Served
    pin: str
    term_gw: FakeGateway
    term_app: FastAPI
    term: TestClient  # the terminal's admin
    tmp: Path

    @property
    def poller(self) -> ManagedPoller:
        poller: ManagedPoller = self.term_app.state.ctx.managed_poller
        return poller

    def token(self, name: str = "alpha") -> str:
        site = len(self.hub.get(TOKENS).json()["tokens"]) + 1  # prefixes of its own
        r = self.hub.post(TOKENS, json={"name": name, "prefixes": [f"10.71.{site}.0/24"]})
        assert r.status_code == 201, r.text
        return str(r.json()["token"])

    def join(self, token: str, pin: str | None = None) -> Any:
        return self.term.post(JOIN, json={"hub_url": self.served.url, "hub_pin": pin or self.pin, "token": token})

    def key(self) -> str:
        with self.term_app.state.ctx.db.session() as db:
            row = db.query(ManagedLink).one()
            return str(row.management_key)

    def versions(self, name: str = "alpha") -> list[dict[str, Any]]:
        r = self.hub.get(f"/api/v1/peer/terminals/{name}/versions")
        assert r.status_code == 200, r.text
        return list(r.json()["versions"])

    def post_version(self, sections: dict[str, Any], comment: str = "") -> Any:
        return self.hub.post("/api/v1/peer/terminals/alpha/versions", json={"sections": sections, "comment": comment})

    def drive(self, done: Callable[[], bool], what: str) -> None:
        """The terminal's poll, one round after another, until `done` (bounded: HUNG_S means hung)."""
        started = time.monotonic()
        while not done():
            assert time.monotonic() - started < HUNG_S, f"hung: {what}"
            self.poller.step()
        print(f"{what}: {time.monotonic() - started:.2f} s")

    def state_of(self, version_id: int) -> str:
        return str(next(v for v in self.versions() if v["id"] == version_id)["state"])


@pytest.fixture
def pair(tmp_path: Path, sock_dir: Path) -> Iterator[Pair]:
    with FakeGateway(sock_dir / "hub.sock") as hub_gw, FakeGateway(sock_dir / "term.sock") as term_gw:
        hub_app = create_app(make_settings(tmp_path / "hub", hub_gw.socket_path))
        term_app = create_app(
            make_settings(tmp_path / "term", term_gw.socket_path, initial_role="terminal", managed_wait_s=1.0)
        )
        cert, key, pin = self_signed(tmp_path / "tls")
        served = Served(hub_app, cert, key)
        try:
            hub_admin = admin_of(hub_app, tmp_path / "hub")
            hub = make_user(hub_admin, hub_app, "otto", "operator")
            applied_desired(hub)
            term = admin_of(term_app, tmp_path / "term")
            yield Pair(hub_gw, hub_app, hub, hub_admin, served, pin, term_gw, term_app, term, tmp_path)
        finally:
            term_app.state.ctx.managed_poller.stop()
            served.stop()
            hub_app.state.ctx.db.dispose()
            term_app.state.ctx.db.dispose()


@pytest.fixture
def joined(pair: Pair) -> Pair:
    r = pair.join(pair.token())
    assert r.status_code == 200, r.text
    return pair


def test_joining_puts_the_hubs_peer_section_in_the_terminal_and_the_hub_lists_it_managed(pair: Pair) -> None:
    before = pair.term.get("/api/v1/versions").json()["latest_version_id"]
    r = pair.join(pair.token())
    assert r.status_code == 200, r.text
    status = r.json()
    assert (status["managed"], status["hub_url"], status["name"]) == (True, pair.served.url, "alpha")
    assert status["joined_at"] is not None and status["last_error"] is None
    assert pair.term.get("/api/v1/managed/status").json() == status

    desired = pair.term.get("/api/v1/config").json()
    assert desired["id"] == before + 1 and desired["author"] == f"hub {pair.served.url}"
    peer = desired["config"]["peer"]
    sat = next(n for n in pair.hub_gw.interfaces if n["name"] == "sat0")["addresses"][0].split("/")[0]
    assert desired["config"]["role"] == "terminal"
    assert (peer["enabled"], peer["hub"], peer["hub_fingerprints"], peer["hub_cluster"]) == (
        True,
        sat,
        [pair.hub_gw.peer.identity.fingerprint],
        False,
    )
    # Applied: the terminal's gateway runs it.
    assert pair.term_gw.config is not None and pair.term_gw.config["peer"] == peer
    assert pair.term.get("/api/v1/config/active").json()["id"] == desired["id"]
    # The hub enrolled it with the terminal's own identity, and manages it.
    detail = pair.hub.get("/api/v1/peer/terminals/alpha").json()
    assert detail["managed"] is True and detail["desired_version"] is None and detail["last_report_at"] is None
    assert detail["terminal"]["fingerprints"] == [pair.term_gw.peer.identity.fingerprint]
    # A second join is refused, nothing changes.
    again = pair.join(pair.token("bravo"))
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_managed", again.text
    assert pair.term.get("/api/v1/versions").json()["latest_version_id"] == desired["id"]


def test_a_wrong_pin_changes_nothing_on_either_side(pair: Pair) -> None:
    token = pair.token()
    term_before = pair.term.get("/api/v1/versions").json()
    hub_before = pair.hub.get("/api/v1/versions").json()
    applied_before = len(pair.term_gw.applied)
    wrong = "sha256:" + hashlib.sha256(b"another key").hexdigest()
    r = pair.join(token, pin=wrong)
    assert r.status_code == 502, r.text
    err = r.json()["error"]
    assert err["code"] == "hub_pin_mismatch" and err["field"] == "hub_pin"
    assert wrong in err["message"] and pair.pin in err["message"], err["message"]  # what was expected, what it saw
    assert pair.term.get("/api/v1/versions").json() == term_before
    assert len(pair.term_gw.applied) == applied_before
    assert pair.term.get("/api/v1/managed/status").json()["managed"] is False
    # The token never reached the hub: still live, the hub unchanged; it joins with the right pin.
    assert {t["name"]: t["state"] for t in pair.hub.get(TOKENS).json()["tokens"]} == {"alpha": "live"}
    assert pair.hub.get("/api/v1/versions").json() == hub_before
    assert pair.join(token).status_code == 200


def test_a_hub_version_is_applied_and_reported(joined: Pair) -> None:
    p = joined
    r = p.post_version({"quic": "pass", "hybla": HYBLA}, "site A tuning")
    assert r.status_code == 201, r.text
    made = r.json()
    assert (made["terminal"], made["state"], made["sections"], made["created_by"]) == (
        "alpha",
        "pending",
        ["hybla", "quic"],
        "otto",
    )
    p.drive(lambda: p.state_of(made["id"]) == "applied", "a hub version applied and reported")

    # The terminal runs it, in a local version by "hub".
    assert p.term_gw.config is not None
    assert (p.term_gw.config["quic"], p.term_gw.config["hybla"]) == ("pass", HYBLA)
    local = p.term.get("/api/v1/config").json()
    assert local["author"] == "hub" and local["comment"] == f"hub version {made['id']}: site A tuning"
    status = p.term.get("/api/v1/managed/status").json()
    assert (status["hub_version_id"], status["outcome"], status["last_error"]) == (made["id"], "applied", None)

    listed = p.versions()
    assert [v["id"] for v in listed] == [made["id"]] and listed[0]["error"] is None
    assert listed[0]["reported_at"] is not None
    detail = p.hub.get("/api/v1/peer/terminals/alpha").json()
    assert detail["applied_version_id"] == made["id"] and detail["desired_version"]["id"] == made["id"]
    assert detail["local_version_id"] == local["id"] and detail["revision"] == f"v{local['id']}"
    assert detail["health_ok"] is True and detail["software"] == "fake-0.1" and detail["last_report_at"] is not None

    # The hub's audit log holds the version made and the report that changed its state.
    entries = p.hub_admin.get("/api/v1/audit", params={"limit": 50}).json()["entries"]
    made_entry = next(e for e in entries if e["action"] == "POST /api/v1/peer/terminals/alpha/versions")
    assert made_entry["actor"] == "otto" and made_entry["detail"]["managed_version_id"] == made["id"]
    reported = [e for e in entries if e["action"] == f"POST {REPORT}"]
    assert len(reported) == 1, reported  # routine reports are not audited
    assert reported[0]["actor"] == "terminal alpha" and reported[0]["detail"]["state"] == "applied"


def test_a_version_the_gateway_refuses_is_rolled_back_and_reported(joined: Pair) -> None:
    p = joined
    first = p.post_version({"hybla": HYBLA}).json()
    p.drive(lambda: p.state_of(first["id"]) == "applied", "the first version applied")
    running_before = dict(p.term_gw.config or {})
    active_before = p.term.get("/api/v1/config/active").json()["id"]

    p.term_gw.fail_next_apply("nft")
    bad = p.post_version({"hybla": {**HYBLA, "rtt0_ms": 60}, "quic": "pass"}).json()
    p.drive(lambda: p.state_of(bad["id"]) != "pending", "a refused version reported")

    got = next(v for v in p.versions() if v["id"] == bad["id"])
    assert got["state"] == "rolled_back", got
    assert "injected failure" in got["error"] and f"rolled back to version {active_before}" in got["error"], got
    # The terminal runs what it ran before (a roll-back version with the same content, by "hub").
    assert p.term_gw.config is not None
    assert {k: v for k, v in p.term_gw.config.items() if k != "revision"} == {
        k: v for k, v in running_before.items() if k != "revision"
    }
    local = p.term.get("/api/v1/config").json()
    assert local["author"] == "hub" and local["comment"] == f"rollback to v{active_before}"
    assert p.term.get("/api/v1/config/active").json()["id"] == local["id"]
    status = p.term.get("/api/v1/managed/status").json()
    assert (status["hub_version_id"], status["outcome"]) == (bad["id"], "rolled_back")
    detail = p.hub.get("/api/v1/peer/terminals/alpha").json()
    assert detail["applied_version_id"] == first["id"] and detail["desired_version"]["state"] == "rolled_back"


def test_the_poll_thread_brings_a_version_while_it_long_polls(joined: Pair) -> None:
    p = joined
    p.poller.start()
    made = p.post_version({"quic": "pass"}).json()
    started = time.monotonic()
    while p.state_of(made["id"]) != "applied":
        assert time.monotonic() - started < HUNG_S, "hung: the poll thread did not apply the version"
        time.sleep(0.05)
    print(f"version applied by the thread after {time.monotonic() - started:.2f} s")
    assert p.term_gw.config is not None and p.term_gw.config["quic"] == "pass"
    p.poller.stop()


def test_bad_sections_are_refused_and_nothing_is_stored(joined: Pair) -> None:
    p = joined
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({}, "no_sections", "sections"),
        ({"interfaces": {"lan": ["eth0"], "satellite": "sat0"}}, "not_a_managed_section", "sections.interfaces"),
        ({"quic": "sometimes"}, "invalid_sections", "sections.quic"),
        ({"hybla": {**HYBLA, "rtt0_ms": -1}}, "invalid_sections", "sections.hybla.rtt0_ms"),
    ]
    for sections, code, field in cases:
        r = p.post_version(sections)
        assert r.status_code == 422, r.text
        assert (r.json()["error"]["code"], r.json()["error"]["field"]) == (code, field), r.text
    assert p.versions() == []
    # After a report the hub knows the terminal's config: a section is checked merged onto it, as a whole.
    p.drive(lambda: p.hub.get("/api/v1/peer/terminals/alpha").json()["last_report_at"] is not None, "a report")
    r = p.post_version({"classes": [{"name": "web", "match": {"dports": ["443"]}, "action": "nope"}]})
    assert r.status_code == 422 and r.json()["error"]["field"].startswith("sections.classes"), r.text
    assert p.versions() == []
    # Hub-side operator roles: a viewer reads, never writes.
    viewer = make_user(p.hub_admin, p.hub_app, "vera", "viewer")
    r = viewer.post("/api/v1/peer/terminals/alpha/versions", json={"sections": {"quic": "pass"}})
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_role", r.text
    assert viewer.get("/api/v1/peer/terminals/alpha/versions").status_code == 200
    assert p.versions() == []
    # A terminal not managed from here (enrolled by fingerprint, or none at all) has no versions.
    assert p.hub.get("/api/v1/peer/terminals/nobody/versions").status_code == 404


def test_a_wrong_or_revoked_key_gets_one_401(joined: Pair) -> None:
    p = joined
    key = p.key()
    report = {"outcome": "none", "health_ok": True, "rx_bytes": 0, "tx_bytes": 0, "live_flows": 0}
    wrong = "pgm1." + "A" * 43
    addresses = iter(range(10, 250))

    def hub() -> TestClient:
        """The hub, from an address of its own each time (one address's refusals are soon throttled: 429)."""
        return TestClient(p.hub_app, base_url="https://testserver", client=(f"192.0.2.{next(addresses)}", 40000))

    def with_key(k: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {k}"} if k is not None else {}

    assert hub().get(DESIRED, params={"wait": 0}, headers=with_key(key)).status_code == 204
    answers = []
    for k in (wrong, key + "x", "", None, key.upper(), "pgm1.short"):
        r = hub().get(DESIRED, params={"wait": 0}, headers=with_key(k))
        assert r.status_code == 401, r.text
        answers.append(r.json())
    # A report: refused alike, whether its body is good, malformed or not JSON at all; so is a malformed query.
    for body in (report, {"outcome": "maybe"}):
        r = hub().post(REPORT, json=body, headers=with_key(wrong))
        assert r.status_code == 401, r.text
        answers.append(r.json())
    r = hub().post(REPORT, content=b"{no", headers={**with_key(wrong), "content-type": "application/json"})
    assert r.status_code == 401, r.text
    answers.append(r.json())
    r = hub().get(DESIRED, params={"wait": 99}, headers=with_key(wrong))
    assert r.status_code == 401, r.text
    answers.append(r.json())
    assert all(a == answers[0] for a in answers) and answers[0]["error"]["code"] == "management_key_refused"
    # An address that keeps failing is throttled; the real key from that same address is still honoured, so no
    # outsider (behind the terminal's NAT, say) locks the terminal out.
    same = hub()
    statuses = [same.get(DESIRED, params={"wait": 0}, headers=with_key(wrong)).status_code for _ in range(8)]
    assert statuses[0] == 401 and statuses[-1] == 429, statuses
    assert same.get(DESIRED, params={"wait": 0}, headers=with_key(key)).status_code == 204
    # Revoking the terminal ends its key.
    r = p.hub.delete("/api/v1/peer/terminals/alpha")
    assert r.status_code == 200, r.text
    r = hub().get(DESIRED, params={"wait": 0}, headers=with_key(key))
    assert r.status_code == 401 and r.json() == answers[0], r.text
    r = hub().post(REPORT, json=report, headers=with_key(key))
    assert r.status_code == 401, r.text
    assert p.hub.get("/api/v1/peer/terminals/alpha").status_code == 404


def walk_gets(app: FastAPI, client: TestClient) -> Iterator[tuple[str, str]]:
    for path, ops in app.openapi()["paths"].items():
        if "get" not in ops or path == "/api/v1/flows/stream":
            continue
        url = path
        for part in ("{version_id}", "{user_id}", "{gateway_id}"):
            url = url.replace(part, "1")
        url = url.replace("{name}", "alpha")
        query = {"a": 1, "b": 1} if path.endswith("/versions/diff") else {}
        r = client.get(url, params=query)
        assert r.status_code < 500, f"GET {url}: {r.status_code} {r.text[:300]}"
        yield url, r.text


def test_no_route_returns_the_management_key(joined: Pair) -> None:
    p = joined
    made = p.post_version({"quic": "pass"}).json()
    p.drive(lambda: p.state_of(made["id"]) == "applied", "a version applied")
    key = p.key()
    secret = key.removeprefix("pgm1.")
    walked = 0
    for app, client in ((p.term_app, p.term), (p.hub_app, p.hub_admin)):
        for url, text in walk_gets(app, client):
            walked += 1
            assert secret not in text, f"GET {url} shows the management key"
    assert walked > 60, walked
    # The hub keeps only its hash; the terminal keeps it in its database (0600), nowhere else.
    hub_db = sqlite3.connect(p.hub_app.state.ctx.settings.database_path)
    try:
        dump = "\n".join(hub_db.iterdump())
    finally:
        hub_db.close()
    assert secret not in dump and hashlib.sha256(key.encode()).hexdigest() in dump


def test_zero_touch_joins_at_start_and_renames_the_file(pair: Pair, tmp_path: Path, sock_dir: Path) -> None:
    join_file = tmp_path / "join.json"
    join_file.write_text(json.dumps({"hub_url": pair.served.url, "hub_pin": pair.pin, "token": pair.token("zulu")}))
    with FakeGateway(sock_dir / "zt.sock") as gw:
        app = create_app(make_settings(tmp_path / "zt", gw.socket_path, initial_role="terminal", join_file=join_file))
        try:
            poller: ManagedPoller = app.state.ctx.managed_poller
            started = time.monotonic()
            while not join_file.with_name("join.json.used").exists():
                assert time.monotonic() - started < HUNG_S, f"hung: zero-touch join ({poller.join_error})"
                poller.step()
            assert not join_file.exists()
            admin = admin_of(app, tmp_path / "zt")
            status = admin.get("/api/v1/managed/status").json()
            assert (status["managed"], status["name"], status["hub_url"]) == (True, "zulu", pair.served.url)
            assert gw.config is not None and gw.config["peer"]["hub_fingerprints"] == [
                pair.hub_gw.peer.identity.fingerprint
            ]
            assert pair.hub.get("/api/v1/peer/terminals/zulu").json()["managed"] is True
        finally:
            app.state.ctx.db.dispose()


def test_a_long_poll_answers_when_a_version_is_made(joined: Pair) -> None:
    """Woken at once (well under a second) against the 20 s wait it asked for: the bound, 10 s, is midway."""
    p = joined
    key = p.key()
    answer: dict[str, Any] = {}

    def long_poll() -> None:
        started = time.monotonic()
        terminal = TestClient(p.hub_app, base_url="https://testserver")
        r = terminal.get(DESIRED, params={"wait": 20, "after": 0}, headers={"Authorization": f"Bearer {key}"})
        answer.update(status=r.status_code, body=r.json() if r.status_code == 200 else None)
        answer["took"] = time.monotonic() - started

    waiters = p.hub_app.state.ctx.managed_versions
    t = threading.Thread(target=long_poll)
    t.start()
    started = time.monotonic()
    while not waiters.waiting():
        assert time.monotonic() - started < HUNG_S, "hung: the long poll never waited"
        time.sleep(0.01)
    made = p.post_version({"quic": "pass"}, "now").json()
    t.join(timeout=HUNG_S)
    print(f"the long poll answered after {answer.get('took', 0):.2f} s")
    assert answer["status"] == 200 and answer["took"] < 10, answer
    assert answer["body"] == {"version_id": made["id"], "sections": {"quic": "pass"}, "comment": "now"}
