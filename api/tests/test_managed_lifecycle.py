"""A managed terminal's versions after they are made: they belong to one enrollment (a terminal enrolled again
never gets its predecessor's), an admin cancels one not sent yet, a version wakes only its own terminal's long
poll; and the per-site figures of a terminal's report. The hub and terminal of tests/test_managed_terminals.py."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from alembic.config import Config
from fastapi.testclient import TestClient

from alembic import command
from perigee_api.api.routes import managed as managed_routes
from perigee_api.core.db import alembic_dir
from perigee_api.core.wakeups import KeyedWakeups
from perigee_api.models import ManagedTerminal
from perigee_api.schemas.managed import MAX_REPORTED_SITES, ManagedReport
from perigee_api.services import managed_hub, managed_terminal
from satlab.testing import HUNG_S
from tests import test_managed_terminals
from tests.conftest import STRONG, login, make_user
from tests.test_managed_terminals import DESIRED, REPORT, Pair

# The hub and terminal of tests/test_managed_terminals.py, joined.
pair = test_managed_terminals.pair
joined = test_managed_terminals.joined
ROUTINE = {"outcome": "none", "health_ok": True, "rx_bytes": 0, "tx_bytes": 0, "live_flows": 0}


def enroll(p: Pair, name: str, fingerprint_char: str) -> str:
    """Redeems a new token for `name` as a terminal would (no session): its management key."""
    token = p.token(name)
    r = TestClient(p.hub_app, base_url="https://testserver").post(
        "/api/v1/peer/enroll", json={"token": token, "fingerprint": "sha256:" + fingerprint_char * 64}
    )
    assert r.status_code == 200, r.text
    return str(r.json()["management_key"])


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def poll(p: Pair, key: str, wait: float = 0, after: int = 0) -> Any:
    terminal = TestClient(p.hub_app, base_url="https://testserver")
    return terminal.get(DESIRED, params={"wait": wait, "after": after}, headers=bearer(key))


def terminal_id(p: Pair, name: str) -> int:
    with p.hub_app.state.ctx.db.session() as db:
        row = db.query(ManagedTerminal).filter_by(name=name).one()
        return int(row.id)


def admin_from(p: Pair, address: str) -> TestClient:
    c = TestClient(p.hub_app, base_url="https://testserver", client=(address, 50000))
    assert login(c, "admin", STRONG).status_code == 200
    return c


def cancel_url(version_id: int, name: str = "alpha") -> str:
    return f"/api/v1/peer/terminals/{name}/versions/{version_id}/cancel"


# --- versions belong to one enrollment -------------------------------------------------------------------------


def test_a_terminal_revoked_and_enrolled_again_never_gets_its_predecessors_pending_versions(joined: Pair) -> None:
    p = joined
    old_key = p.key()
    old = p.post_version({"quic": "pass"}, "for the old box").json()
    assert old["enrollment"] == 1 and old["delivered_at"] is None

    assert p.hub.delete("/api/v1/peer/terminals/alpha").status_code == 200
    new_key = enroll(p, "alpha", "b")

    # The new enrollment's long poll finds nothing: the old version is not its to apply.
    r = poll(p, new_key)
    assert r.status_code == 204, r.text
    assert poll(p, old_key).status_code == 401
    # It stays in the history, superseded, with the reason.
    listed = p.versions()
    assert [v["id"] for v in listed] == [old["id"]]
    got = listed[0]
    assert got["state"] == "superseded" and "revoked" in got["error"] and got["ended_at"] is not None, got
    assert got["delivered_at"] is None and got["enrollment"] == 1
    detail = p.hub.get("/api/v1/peer/terminals/alpha").json()
    assert detail["enrollment"] == 2 and detail["desired_version"]["id"] == old["id"]

    # A version made for the new enrollment is the one it gets; the old one's key cannot report on it.
    new = p.post_version({"quic": "fallback"}).json()
    assert new["enrollment"] == 2
    r = poll(p, new_key)
    assert r.status_code == 200 and r.json()["version_id"] == new["id"], r.text
    r = TestClient(p.hub_app, base_url="https://testserver").post(
        REPORT, json={**ROUTINE, "version_id": old["id"], "outcome": "applied"}, headers=bearer(new_key)
    )
    assert r.status_code == 204, r.text
    assert p.state_of(old["id"]) == "superseded"  # a report cannot bring an ended enrollment's version back


def test_a_new_key_for_the_same_name_supersedes_what_was_pending(joined: Pair) -> None:
    """Enrolled again without a revoke in between (the key granted anew): the pending versions end all the same."""
    p = joined
    old_key = p.key()
    made = p.post_version({"quic": "pass"}).json()
    with p.hub_app.state.ctx.db.session() as db:
        new_key = managed_hub.grant(db, "alpha")
        db.commit()
    assert poll(p, new_key).status_code == 204
    assert poll(p, old_key).status_code == 401
    got = p.versions()[0]
    assert (got["id"], got["state"]) == (made["id"], "superseded") and "enrolled again" in got["error"], got


# --- an admin cancels a version not sent yet -------------------------------------------------------------------


def test_an_admin_cancels_a_pending_version_and_the_terminal_never_gets_it(joined: Pair) -> None:
    p = joined
    first = p.post_version({"quic": "pass"}, "not this one").json()
    second = p.post_version({"hybla": {"rtt0_ms": 30, "base_rtt_ms": 0, "cwnd_max": 0}}, "this one").json()

    # Admin only: an operator or a viewer is refused and nothing changes; so is an admin without the CSRF token.
    viewer = make_user(p.hub_admin, p.hub_app, "vera", "viewer")
    for who in (viewer, p.hub):
        r = who.post(cancel_url(first["id"]))
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_role", r.text
    admin = admin_from(p, "198.51.100.23")
    r = admin.post(cancel_url(first["id"]), headers={"X-CSRF-Token": ""})
    assert r.status_code == 403 and r.json()["error"]["code"] == "csrf_failed", r.text
    assert p.state_of(first["id"]) == "pending"

    r = admin.post(cancel_url(first["id"]))
    assert r.status_code == 200, r.text
    cancelled = r.json()
    assert (cancelled["id"], cancelled["state"], cancelled["error"]) == (first["id"], "cancelled", "cancelled by admin")
    assert cancelled["ended_at"] is not None and cancelled["delivered_at"] is None

    # The terminal's poll skips it: the next version it gets is the second, and it never applies the first.
    r = poll(p, p.key())
    assert r.status_code == 200 and r.json()["version_id"] == second["id"], r.text
    p.drive(lambda: p.state_of(second["id"]) == "applied", "the version after the cancelled one applied")
    comments = [v["comment"] for v in p.term.get("/api/v1/versions").json()["versions"]]
    assert not any(c.startswith(f"hub version {first['id']}") for c in comments), comments
    assert p.term_gw.config is not None and p.term_gw.config["quic"] != "pass"
    assert p.state_of(first["id"]) == "cancelled"

    # Audited, with the admin's own address.
    entries = p.hub_admin.get("/api/v1/audit", params={"limit": 50}).json()["entries"]
    done = [e for e in entries if e["action"] == f"POST {cancel_url(first['id'])}" and e["result"] == "ok"]
    assert len(done) == 1, entries
    assert (done[0]["actor"], done[0]["address"]) == ("admin", "198.51.100.23"), done[0]
    assert done[0]["detail"]["managed_version_id"] == first["id"] and done[0]["detail"]["state"] == "cancelled"


def test_cancelling_a_sent_or_applied_version_is_a_409_that_changes_nothing(joined: Pair) -> None:
    p = joined
    admin = admin_from(p, "198.51.100.24")
    made = p.post_version({"quic": "pass"}).json()
    r = poll(p, p.key())
    assert r.status_code == 200 and r.json()["version_id"] == made["id"], r.text
    sent = next(v for v in p.versions() if v["id"] == made["id"])
    assert sent["state"] == "pending" and sent["delivered_at"] is not None

    r = admin.post(cancel_url(made["id"]))
    assert r.status_code == 409, r.text
    err = r.json()["error"]
    assert err["code"] == "version_not_cancellable" and "sent to the terminal already" in err["message"], err
    assert p.versions() == [sent]

    # Sent again if the terminal asks again (it lost the answer): still pending, still the same version.
    assert poll(p, p.key()).json()["version_id"] == made["id"]
    p.drive(lambda: p.state_of(made["id"]) == "applied", "the sent version applied")
    before = p.versions()
    r = admin.post(cancel_url(made["id"]))
    assert r.status_code == 409 and "is applied" in r.json()["error"]["message"], r.text
    assert p.versions() == before
    # A cancelled one cannot be cancelled twice; a version of no such number is a 404.
    other = p.post_version({"quic": "fallback"}).json()
    assert admin.post(cancel_url(other["id"])).status_code == 200
    assert admin.post(cancel_url(other["id"])).status_code == 409
    assert admin.post(cancel_url(999_999)).status_code == 404


# --- a version wakes only its own terminal ---------------------------------------------------------------------


def test_a_version_wakes_only_its_own_terminals_long_poll(joined: Pair, monkeypatch: pytest.MonkeyPatch) -> None:
    p = joined
    key_b = enroll(p, "bravo", "c")
    id_a, id_b = terminal_id(p, "alpha"), terminal_id(p, "bravo")
    looks: Counter[int] = Counter()
    real_next = managed_routes._next

    def counted(ctx: Any, tid: int, after: int) -> Any:
        looks[tid] += 1
        return real_next(ctx, tid, after)

    monkeypatch.setattr(managed_routes, "_next", counted)
    waiters: KeyedWakeups = p.hub_app.state.ctx.managed_versions
    answers: dict[str, dict[str, Any]] = {}

    def long_poll(label: str, key: str, wait: float) -> None:
        started = time.monotonic()
        r = poll(p, key, wait=wait)
        answers[label] = {"status": r.status_code, "took": time.monotonic() - started}
        if r.status_code == 200:
            answers[label]["body"] = r.json()

    threads = [
        threading.Thread(target=long_poll, args=("a", p.key(), 20.0)),
        threading.Thread(target=long_poll, args=("b", key_b, 3.0)),
    ]
    for t in threads:
        t.start()
    started = time.monotonic()
    while waiters.waiting(id_a) < 1 or waiters.waiting(id_b) < 1:
        assert time.monotonic() - started < HUNG_S, "hung: the long polls never waited"
        time.sleep(0.01)
    woken_before = waiters.woken
    made = p.post_version({"quic": "pass"}).json()
    for t in threads:
        t.join(timeout=HUNG_S)
    print(f"A answered after {answers['a']['took']:.2f} s, B after {answers['b']['took']:.2f} s")
    assert answers["a"]["status"] == 200 and answers["a"]["body"]["version_id"] == made["id"], answers
    assert answers["a"]["took"] < 10, answers  # woken, not timed out (it asked for 20 s)
    assert answers["b"]["status"] == 204 and answers["b"]["took"] >= 2.9, answers  # slept to its own timeout
    # One look for B (before it waited), none after: A's version never woke it. A looked once more, woken.
    assert (looks[id_a], looks[id_b]) == (2, 1), looks
    assert waiters.woken - woken_before == 1
    # Done polls leave nothing behind.
    assert waiters.waiting() == 0 and waiters.keys() == 0


def test_keyed_wakeups_keep_nothing_for_polls_that_timed_out_and_release_the_oldest_of_a_key() -> None:
    async def scenario() -> tuple[list[bool], int, int, list[bool]]:
        w = KeyedWakeups(max_per_key=2)

        async def one(key: int) -> bool:
            with w.listen(key) as waiter:
                return await waiter.wait(0.01)

        timed_out = await asyncio.gather(*(one(k) for k in range(500)))
        left_keys, left_waiting = w.keys(), w.waiting()
        # Three polls of one key, cap 2: the oldest is released (answers at once), the others wait.
        released: list[bool] = []

        async def held(delay: float) -> None:
            await asyncio.sleep(delay)
            with w.listen("k") as waiter:
                await waiter.wait(0.3)
                released.append(waiter.released)

        await asyncio.gather(held(0), held(0.01), held(0.02))
        return list(timed_out), left_keys, left_waiting + w.keys(), released

    timed_out, keys, waiting, released = asyncio.run(scenario())
    assert not any(timed_out) and keys == 0 and waiting == 0
    assert released == [True, False, False]


# --- per-site figures in the report ----------------------------------------------------------------------------


def site_counters(down: int, up: int) -> dict[str, int]:
    return {"bytes_down": down, "bytes_up": up, "cache_saved_bytes": 0, "flows": 1, "retrans_segments": 0}


def test_a_report_carries_the_terminals_per_site_figures(joined: Pair) -> None:
    p = joined
    p.term_gw.counters["by_site"] = {"ship-a": site_counters(5_000_000, 40_000), "other": site_counters(700, 30)}
    p.term_app.state.ctx.latest = {"site_flows": {"ship-a": 3.0, "ship-b": 1.0}}
    p.drive(lambda: p.hub.get("/api/v1/peer/terminals/alpha").json()["last_report_at"] is not None, "a report")
    detail = p.hub.get("/api/v1/peer/terminals/alpha").json()
    assert detail["sites"] == [
        {"name": "other", "rx_bytes": 700, "tx_bytes": 30, "live_flows": 0},
        {"name": "ship-a", "rx_bytes": 5_000_000, "tx_bytes": 40_000, "live_flows": 3},
        {"name": "ship-b", "rx_bytes": 0, "tx_bytes": 0, "live_flows": 1},
    ]


def test_a_terminal_reports_its_busiest_sites_and_only_names_the_hub_takes() -> None:
    by_site = {f"s{i:03}": site_counters(i, 1) for i in range(300)}
    by_site["bad name"] = site_counters(10**9, 0)
    got = managed_terminal.site_figures(by_site, {"s299": 2.0, "s000": 5.0})
    assert len(got) == MAX_REPORTED_SITES
    assert [g["name"] for g in got] == [f"s{i:03}" for i in range(300 - MAX_REPORTED_SITES, 300)]
    assert got[-1] == {"name": "s299", "rx_bytes": 299, "tx_bytes": 1, "live_flows": 2}
    ManagedReport.model_validate({**ROUTINE, "sites": got})  # what it sends, the hub takes


def test_a_report_with_bad_site_figures_is_a_422_and_stores_nothing(joined: Pair) -> None:
    p = joined
    hub = TestClient(p.hub_app, base_url="https://testserver")
    good = [{"name": "ship-a", "rx_bytes": 10, "tx_bytes": 20, "live_flows": 1}]
    r = hub.post(REPORT, json={**ROUTINE, "rx_bytes": 5, "sites": good}, headers=bearer(p.key()))
    assert r.status_code == 204, r.text
    stored = p.hub.get("/api/v1/peer/terminals/alpha").json()
    assert stored["sites"] == good and stored["rx_bytes"] == 5

    site = good[0]
    bad: list[tuple[Any, str]] = [
        ([{**site, "rx_bytes": -1}], "sites.0.rx_bytes"),
        ([{**site, "live_flows": "3"}], "sites.0.live_flows"),
        ([{**site, "tx_bytes": True}], "sites.0.tx_bytes"),
        ([{**site, "tx_bytes": 2**63}], "sites.0.tx_bytes"),
        ([{**site, "name": "no spaces"}], "sites.0.name"),
        ([{**site, "name": "x" * 65}], "sites.0.name"),
        ([{**site, "extra": 1}], "sites.0.extra"),
        ([site, site], "sites"),
        ([{**site, "name": f"s{i}"} for i in range(257)], "sites"),
        ({"ship-a": site}, "sites"),
    ]
    for sites, field in bad:
        r = hub.post(REPORT, json={**ROUTINE, "rx_bytes": 99, "sites": sites}, headers=bearer(p.key()))
        assert r.status_code == 422, (field, r.text)
        assert r.json()["error"]["field"] == f"body.{field}", (field, r.json())
    after = p.hub.get("/api/v1/peer/terminals/alpha").json()
    assert after["sites"] == good and after["rx_bytes"] == 5 and after["last_report_at"] == stored["last_report_at"]


def test_the_upgrade_supersedes_what_was_pending_for_an_ended_enrollment(tmp_path: Path) -> None:
    """Before versions knew their enrollment: a pending version made before its terminal enrolled again, or for a
    revoked terminal, is superseded by the upgrade; one for the enrollment still running stays pending."""
    url = f"sqlite:///{tmp_path / 'perigee.db'}"
    cfg = Config()
    cfg.set_main_option("script_location", str(alembic_dir()))
    cfg.set_main_option("sqlalchemy.url", url)
    command.upgrade(cfg, "0010")
    with sqlite3.connect(tmp_path / "perigee.db") as db:
        db.executemany(
            "INSERT INTO managed_terminals (id, name, key_hash, enrolled_at) VALUES (?, ?, ?, ?)",
            [(1, "kept", "a" * 64, 100.0), (2, "again", "b" * 64, 200.0), (3, "revoked", None, 100.0)],
        )
        db.executemany(
            "INSERT INTO managed_versions (id, terminal_id, created_at, created_by, comment, sections, state) "
            "VALUES (?, ?, ?, 'otto', '', '{}', ?)",
            [
                (1, 1, 150.0, "pending"),
                (2, 2, 150.0, "pending"),  # made before "again" enrolled again (200)
                (3, 2, 250.0, "pending"),
                (4, 3, 150.0, "pending"),
                (5, 2, 150.0, "applied"),
            ],
        )
    command.upgrade(cfg, "head")
    with sqlite3.connect(tmp_path / "perigee.db") as db:
        states = dict(db.execute("SELECT id, state FROM managed_versions ORDER BY id").fetchall())
        enrollments = {e for (e,) in db.execute("SELECT enrollment FROM managed_versions")}
        reason = db.execute("SELECT error FROM managed_versions WHERE id = 2").fetchone()[0]
    assert states == {1: "pending", 2: "superseded", 3: "pending", 4: "superseded", 5: "applied"}
    assert enrollments == {1} and "earlier enrollment" in reason
