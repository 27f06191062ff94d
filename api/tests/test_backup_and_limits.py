from __future__ import annotations

import json

from fastapi import FastAPI
from fastapi.testclient import TestClient

from perigee_api.core.config import Settings
from tests.conftest import STRONG, login, new_client


def _upload(client: TestClient, name: str, data: bytes) -> object:
    return client.post("/api/v1/system/restore", files={"file": (name, data, "application/json")})


def test_backup_has_hashes_only_and_no_tokens(admin: TestClient, operator: TestClient) -> None:
    operator.post("/api/v1/tokens", json={"name": "bot"})
    secret = operator.post("/api/v1/tokens", json={"name": "bot2"}).json()["secret"]
    b = admin.get("/api/v1/system/backup").json()
    text = json.dumps(b)
    assert STRONG not in text and secret not in text and "token" not in text.lower()
    assert all(u["password_hash"].startswith("$argon2") for u in b["users"])
    assert {u["username"] for u in b["users"]} == {"admin", "otto"}
    audit = admin.get("/api/v1/audit", params={"action": "system/backup"}).json()["entries"]
    assert audit and audit[0]["actor"] == "admin"


def test_restore_roundtrip_in_one_transaction(app: FastAPI, admin: TestClient) -> None:
    admin.post("/api/v1/policy/classes", json={"name": "web", "priority": 1, "action": "accelerate"})
    backup = admin.get("/api/v1/system/backup").json()
    n_versions = len(backup["versions"])
    admin.post(
        "/api/v1/policy/classes",
        json={"name": "later", "priority": 2, "action": "bypass", "match": {"dports": ["22"]}},
    )
    r = _upload(admin, "perigee-backup.json", json.dumps(backup).encode())
    assert r.status_code == 200, r.text
    assert r.json()["versions"] == n_versions
    # sessions were replaced: log in again with the restored hash
    c = new_client(app)
    assert login(c, "admin", STRONG).status_code == 200
    assert c.get("/api/v1/versions").json()["total"] == n_versions


def test_restore_rejects_bad_files_and_writes_nothing(app: FastAPI, admin: TestClient, settings: Settings) -> None:
    backup = admin.get("/api/v1/system/backup").json()
    before = admin.get("/api/v1/versions").json()["total"]
    good = json.dumps(backup).encode()
    for name in (
        "../../etc/passwd.json",
        "/abs/backup.json",
        "a/b.json",
        "..json",
        "backup.txt",
        "x\x00.json",
        ".hidden.json",
    ):
        r = _upload(admin, name, good)
        assert r.status_code == 422 and r.json()["error"]["code"] == "bad_filename", (name, r.text)
    r = _upload(admin, "b.json", b"{not json")
    assert r.status_code == 422 and r.json()["error"]["code"] == "bad_json"
    clear = json.loads(good)
    clear["users"][0]["password_hash"] = "hunter2hunter2"
    r = _upload(admin, "b.json", json.dumps(clear).encode())
    assert r.status_code == 422 and "password_hash" in r.json()["error"]["field"]
    # an error deep in the last version: nothing at all is written
    broken = json.loads(good)
    broken["versions"][-1]["config"]["classes"] = [{"name": "x", "priority": 1, "action": "zap"}]
    r = _upload(admin, "b.json", json.dumps(broken).encode())
    assert r.status_code == 422 and "versions" in r.json()["error"]["field"]
    noadmin = json.loads(good)
    noadmin["users"][0]["role"] = "viewer"
    assert _upload(admin, "b.json", json.dumps(noadmin).encode()).status_code == 422
    big = b" " * (settings.max_restore_bytes + 10)
    r = _upload(admin, "b.json", big)
    assert r.status_code == 413
    assert admin.get("/api/v1/versions").json()["total"] == before


def test_oversized_and_malformed_bodies(operator: TestClient, settings: Settings) -> None:
    before = operator.get("/api/v1/versions").json()["total"]
    huge = {
        "name": "x",
        "priority": 1,
        "action": "accelerate",
        "comment": "a" * (settings.max_body_bytes + 1),
    }
    r = operator.post("/api/v1/policy/classes", json=huge)
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"

    # no Content-Length (chunked): still cut off at the limit
    def chunks():  # type: ignore[no-untyped-def]
        for _ in range(settings.max_body_bytes // 65536 + 2):
            yield b"x" * 65536

    r = operator.post("/api/v1/policy/classes", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    r = operator.post("/api/v1/policy/classes", content=b'{"name": ', headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "validation_error"
    r = operator.post("/api/v1/policy/classes", content=b"[1,2]", headers={"Content-Type": "application/json"})
    assert r.status_code == 422
    r = operator.post("/api/v1/policy/classes", json={"name": "../../x", "priority": 1, "action": "bypass"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "body.name"
    assert operator.get("/api/v1/versions").json()["total"] == before


def test_audit_records_writes(admin: TestClient, operator: TestClient) -> None:
    operator.post("/api/v1/policy/classes", json={"name": "web", "priority": 1, "action": "accelerate"})
    operator.post("/api/v1/policy/classes", json={"name": "web", "priority": 1, "action": "accelerate"})
    entries = admin.get("/api/v1/audit", params={"actor": "otto"}).json()["entries"]
    writes = [e for e in entries if e["action"] == "POST /api/v1/policy/classes"]
    assert [e["result"] for e in writes] == ["http_409", "ok"]
    assert writes[1]["detail"]["version_id"] and writes[1]["address"]


def test_cache_passthrough(operator: TestClient, viewer: TestClient, fake_gw) -> None:  # type: ignore[no-untyped-def]
    assert viewer.get("/api/v1/cache/stats").json()["requests"] == 0
    r = operator.post("/api/v1/cache/purge", json={"url": "http://10.71.3.10/big.bin"})
    assert r.json() == {"ok": True, "purged": 1}
    assert operator.post("/api/v1/cache/purge", json={"all": True}).json()["purged"] == 7
    assert operator.post("/api/v1/cache/purge", json={}).status_code == 422
    assert operator.post("/api/v1/cache/purge", json={"url": "javascript:alert(1)"}).status_code == 422
    assert fake_gw.purges == [{"url": "http://10.71.3.10/big.bin"}, {"all": True}]


def test_dns_passthrough(operator: TestClient, viewer: TestClient, fake_gw) -> None:  # type: ignore[no-untyped-def]
    fake_gw.dns_stats.update(queries=40, cache_hits=30, satellite_time_saved_s=18.0)
    stats = viewer.get("/api/v1/dns/stats").json()
    assert (stats["queries"], stats["satellite_time_saved_s"]) == (40, 18.0)
    assert operator.post("/api/v1/dns/flush", json={"name": "www.example.com"}).json() == {"ok": True}
    assert operator.post("/api/v1/dns/flush", json={"all": True}).json() == {"ok": True}
    for bad in ({}, {"all": True, "name": "a.example"}, {"name": "bad name"}, {"name": "a..b"}, {"zone": "x"}):
        assert operator.post("/api/v1/dns/flush", json=bad).status_code == 422, bad
    assert viewer.post("/api/v1/dns/flush", json={"all": True}).status_code == 403
    assert fake_gw.flushes == [{"name": "www.example.com"}, {"all": True}]


def test_rejected_writes_are_audited(admin: TestClient, operator: TestClient, settings: Settings) -> None:
    operator.post("/api/v1/policy/classes", content=b"x" * (settings.max_body_bytes + 1))
    token = operator.headers.pop("X-CSRF-Token")
    operator.post("/api/v1/policy/bypass/restore-builtins")
    operator.headers["X-CSRF-Token"] = token
    results = [e["result"] for e in admin.get("/api/v1/audit", params={"actor": "anonymous"}).json()["entries"]]
    assert "http_413" in results and "http_403" in results


def test_housekeeping_drops_expired_sessions(app: FastAPI, admin: TestClient, settings: Settings) -> None:
    import time

    from perigee_api.models import BrowserSession
    from perigee_api.services.auth import housekeeping

    with app.state.ctx.db.session() as db:
        assert db.query(BrowserSession).count() >= 1
        housekeeping(db, settings, time.time() + settings.session_ttl_s + 1)
        db.commit()
        assert db.query(BrowserSession).count() == 0
    assert admin.get("/api/v1/auth/me").status_code == 401


def test_interfaces_passthrough(viewer: TestClient, operator: TestClient, fake_gw) -> None:  # type: ignore[no-untyped-def]
    listed = viewer.get("/api/v1/system/interfaces").json()["interfaces"]
    assert [i["name"] for i in listed] == ["lo", "lan0", "sat0", "eth9"]
    assert all(i["configured_as"] is None for i in listed)  # the gateway runs no config yet
    version_id = operator.get("/api/v1/config").json()["id"]
    assert operator.post(f"/api/v1/versions/{version_id}/apply").json()["ok"]
    used = {i["name"]: i["configured_as"] for i in viewer.get("/api/v1/system/interfaces").json()["interfaces"]}
    assert used == {"lo": None, "lan0": "lan", "sat0": "satellite", "eth9": None}
    lan0 = next(i for i in listed if i["name"] == "lan0")
    assert (lan0["addresses"], lan0["mtu"], lan0["oper_state"]) == (["10.71.1.1/24", "fe80::1/64"], 1500, "up")
