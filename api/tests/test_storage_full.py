"""The disk under the database full: reads answer, writes are refused with 507 in the API's error shape and
nothing is half-written, the collector keeps the live view and resumes storing history once space is back.

The full disk is SQLite's own: every connection is capped at the pages the database has (PRAGMA
max_page_count), so a write that needs one more page fails with SQLITE_FULL ("database or disk is full"),
exactly as on a full filesystem.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import event, func, select

from perigee_api.core.config import Settings
from perigee_api.core.storage import is_storage_full
from perigee_api.models import FlowRecord
from perigee_api.services import collector as collector_mod
from perigee_fakes.fake_gateway import FakeGateway, make_flow


@contextmanager
def database_full(app: FastAPI) -> Iterator[None]:
    engine = app.state.ctx.db.engine

    def cap(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the WAL's pages count too: fold them in first
        pages = cur.execute("PRAGMA page_count").fetchone()[0]
        cur.execute(f"PRAGMA max_page_count = {pages}")
        cur.close()

    event.listen(engine, "connect", cap)
    engine.dispose()  # every connection from here on is a new, capped one
    try:
        yield
    finally:
        event.remove(engine, "connect", cap)
        engine.dispose()


def grow(c: TestClient, n: int) -> dict[str, Any]:
    """A whole-config replacement large enough to need new pages (a long comment is part of the version)."""
    cfg = c.get("/api/v1/config").json()["config"]
    cfg["splitter"]["idle_timeout_s"] = 300 + n
    return {"config": cfg, "comment": f"change {n} " + "x" * 400}


def write_until_refused(admin: TestClient) -> None:
    """Stores versions until the full database refuses one (507): what fits in pages already free is stored."""
    for n in range(3, 40):
        if admin.put("/api/v1/config", json=grow(admin, n)).status_code == 507:
            return


def integrity(settings: Settings) -> str:
    with sqlite3.connect(settings.database_path) as con:
        return str(con.execute("PRAGMA integrity_check").fetchone()[0])


def test_storage_full_is_recognised() -> None:
    assert is_storage_full(sqlite3.OperationalError("database or disk is full"))
    assert is_storage_full(OSError(28, "No space left on device"))
    assert not is_storage_full(sqlite3.OperationalError("database is locked"))
    assert not is_storage_full(ValueError("database or disk is full"))


def test_full_disk_refuses_writes_with_507_and_keeps_reads(app: FastAPI, admin: TestClient, settings: Settings) -> None:
    before = admin.get("/api/v1/versions").json()
    # Fill the free pages a fresh database may still have, so the cap bites on the next write.
    for n in range(3):
        assert admin.put("/api/v1/config", json=grow(admin, n)).status_code == 200
    written = admin.get("/api/v1/versions").json()["total"]
    assert written == before["total"] + 3
    with database_full(app):
        refused = 0
        for n in range(3, 40):
            r = admin.put("/api/v1/config", json=grow(admin, n))
            if r.status_code == 200:
                written += 1  # pages freed inside the file (none normally): it fits, and is whole
                continue
            assert r.status_code == 507, r.text
            err = r.json()["error"]
            assert err["code"] == "storage_full" and "full" in err["message"]
            refused += 1
            if refused == 3:
                break
        assert refused == 3
        assert admin.get("/api/v1/health").status_code == 200
        assert admin.get("/api/v1/flows").status_code == 200
        listed = admin.get("/api/v1/versions")
        assert listed.status_code == 200 and listed.json()["total"] == written
    r = admin.put("/api/v1/config", json=grow(admin, 99))
    assert r.status_code == 200, r.text
    assert admin.get("/api/v1/versions").json()["total"] == written + 1
    assert integrity(settings) == "ok"


def test_full_disk_keeps_bearer_reads(app: FastAPI, admin: TestClient) -> None:
    """An API token's read records its last use; with the disk full that write is skipped, the read answers."""
    secret = admin.post("/api/v1/tokens", json={"name": "ro", "scope": "read"}).json()["secret"]
    reader = TestClient(app, base_url="https://testserver", headers={"Authorization": f"Bearer {secret}"})
    for n in range(3):
        admin.put("/api/v1/config", json=grow(admin, n))
    with database_full(app):
        write_until_refused(admin)
        r = reader.get("/api/v1/versions")
        assert r.status_code == 200, r.text


def test_collector_survives_a_full_disk_and_stores_what_waited(
    app: FastAPI, admin: TestClient, fake_gw: FakeGateway, settings: Settings
) -> None:
    ctx = app.state.ctx
    col = ctx.collector
    t0 = float(int(time.time()))
    for n in range(3):
        admin.put("/api/v1/config", json=grow(admin, n))
    with database_full(app):
        write_until_refused(admin)
        for i in range(4):
            fake_gw.live_flows = [make_flow(100 + i)]
            fake_gw.closed_ring = [make_flow(10 * i + k, state="closed") for k in range(50)]
            col.tick(now=t0 + i)  # must not raise
            assert fake_gw.closed_ring == []
            assert admin.get("/api/v1/flows").json()["count"] == 1  # the live view is current
        assert col.last_error is not None and "full" in col.last_error
        assert len(col.pending_flows) == 200
        assert admin.get("/api/v1/health").json()["api"]["collector"]["last_error"] == col.last_error
    # Space again: the next attempt after the back-off stores every flow that waited.
    col.tick(now=t0 + 4 + collector_mod.WRITE_BACKOFF_MAX_S)
    assert col.last_error is None and col.pending_flows == []
    with ctx.db.session() as db:
        assert db.scalar(select(func.count()).select_from(FlowRecord)) == 200
    assert integrity(settings) == "ok"


def test_collector_backs_off(app: FastAPI) -> None:
    col = app.state.ctx.collector
    t = 1000.0
    pauses = []
    for _ in range(6):
        col._storage_full(t, "test")
        pauses.append(col._retry_at - t)
        assert not col._writable(t + pauses[-1] - 0.01) and col._writable(t + pauses[-1])
        t = col._retry_at
    assert pauses == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
