"""Secrets in a config are write-only: every read (a version, the running config, a diff, the drift, a backup)
shows a keyed fingerprint for every role, and a fingerprint sent back keeps the secret it stands for. The
upgrade scrubs the shared peer key from every stored version and from a restored backup made before it.

Today's config has no secret field (the peer path's identities are fingerprints, public); the mechanism is
exercised here with `peer.hub` declared a secret for the test, as a field the schema marks `writeOnly` would be.
"""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path
from typing import Annotated, Any

import pytest
from alembic.config import Config
from fastapi.testclient import TestClient
from pydantic import BaseModel, Field

from alembic import command
from perigee_api.core.config import Settings
from perigee_api.core.db import alembic_dir
from perigee_api.main import create_app
from perigee_control import secret_fields
from perigee_fakes.fake_gateway import FakeGateway
from perigee_fakes.lab_config import lab_config
from tests.conftest import STRONG, login, make_settings, new_client, one_time_password

HUB, OTHER_HUB = "10.71.2.77", "10.71.2.78"
LEGACY_KEY = "5e" * 32


# --- the mechanism ---------------------------------------------------------------------------------------------


class _Item(BaseModel):
    psk: Annotated[str, Field(json_schema_extra={"writeOnly": True})] = ""
    name: str = ""


class _Doc(BaseModel):
    items: list[_Item] = []
    one: _Item = _Item()


def test_the_fields_a_schema_marks_write_only_are_the_secrets() -> None:
    assert secret_fields.marked_paths(_Doc) == {"items[].psk", "one.psk"}
    # The gateway's config marks none today: its identities are public fingerprints.
    assert secret_fields.marked_paths() == frozenset()


def test_redact_shows_fingerprints_and_unredact_takes_them_back() -> None:
    key = b"k" * 32
    paths = secret_fields.marked_paths(_Doc)
    doc = {"items": [{"psk": "alpha", "name": "a"}, {"psk": "", "name": "b"}], "one": {"psk": "bravo"}}
    shown = secret_fields.redact(doc, key, paths)
    fa, fb = secret_fields.fingerprint(key, "alpha"), secret_fields.fingerprint(key, "bravo")
    assert shown == {"items": [{"psk": fa, "name": "a"}, {"psk": "", "name": "b"}], "one": {"psk": fb}}
    assert doc["items"][0]["psk"] == "alpha", "the original is not touched"
    assert secret_fields.fingerprint(b"x" * 32, "alpha") != fa, "keyed: another key, another fingerprint"
    known = secret_fields.held(doc, key, paths)
    edited = {**shown, "items": [*shown["items"], {"psk": "charlie", "name": "c"}]}
    assert secret_fields.unredact(edited, known, paths)["items"] == [
        {"psk": "alpha", "name": "a"},
        {"psk": "", "name": "b"},
        {"psk": "charlie", "name": "c"},
    ]
    with pytest.raises(secret_fields.SecretError, match=r"one\.psk"):
        secret_fields.unredact({"one": {"psk": "secret:0123456789abcdef"}}, known, paths)


# --- through the API, with peer.hub standing in for a secret ---------------------------------------------------


@pytest.fixture
def hub_is_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secret_fields, "EXTRA_SECRET_PATHS", ("peer.hub",))


def terminal_with_hub(hub: str) -> dict[str, Any]:
    cfg = lab_config("terminal").to_json()
    cfg["peer"].update(hub=hub)
    return cfg


def test_every_read_shows_the_secret_as_its_fingerprint_for_every_role(
    hub_is_secret: None, admin: TestClient, viewer: TestClient, fake_gw: FakeGateway
) -> None:
    v1 = admin.put("/api/v1/config", json={"config": terminal_with_hub(HUB)}).json()["version_id"]
    assert admin.post(f"/api/v1/versions/{v1}/apply", json={}).json()["ok"]
    assert fake_gw.config is not None and fake_gw.config["peer"]["hub"] == HUB, "the gateway gets the secret"
    v2 = admin.put("/api/v1/config", json={"config": terminal_with_hub(OTHER_HUB)}).json()["version_id"]
    for client in (admin, viewer):
        shown = client.get("/api/v1/config").json()["config"]["peer"]["hub"]
        assert secret_fields.FINGERPRINT_RE.match(shown), shown
        reads = [
            client.get("/api/v1/config"),
            client.get("/api/v1/config/active"),
            client.get("/api/v1/config/running"),
            client.get(f"/api/v1/versions/{v1}"),
            client.get("/api/v1/versions/diff", params={"a": v1, "b": v2}),
        ]
        for r in reads:
            assert r.status_code == 200, r.text
            assert HUB not in r.text and OTHER_HUB not in r.text, r.request.url
        change = client.get("/api/v1/versions/diff", params={"a": v1, "b": v2}).json()["changes"]
        hub_change = next(c for c in change if c["path"] == "$.peer.hub")
        assert hub_change["old"] != hub_change["new"], "a changed secret shows as a changed fingerprint"
        drift = client.get("/api/v1/config/running").json()["changes"]
        assert [c["path"] for c in drift] == ["$.peer.hub"]
    backup = admin.get("/api/v1/system/backup")
    assert backup.status_code == 200 and HUB not in backup.text and OTHER_HUB not in backup.text


def test_a_change_elsewhere_keeps_the_secret_and_a_backup_restores_it(
    hub_is_secret: None, admin: TestClient, fake_gw: FakeGateway
) -> None:
    admin.put("/api/v1/config", json={"config": terminal_with_hub(HUB)})
    r = admin.post("/api/v1/policy/classes", json={"name": "web", "priority": 100, "action": "accelerate"})
    assert r.status_code in (200, 201), r.text
    vid = r.json()["version_id"]
    assert admin.post(f"/api/v1/versions/{vid}/apply", json={}).json()["ok"]
    assert fake_gw.config is not None and fake_gw.config["peer"]["hub"] == HUB

    data = admin.get("/api/v1/system/backup").content
    assert HUB.encode() not in data
    r = admin.post("/api/v1/system/restore", files={"file": ("b.json", io.BytesIO(data), "application/json")})
    assert r.status_code == 200, r.text
    assert login(admin, "admin", STRONG).status_code == 200  # a restore ends every session
    assert admin.post(f"/api/v1/versions/{vid}/apply", json={}).json()["ok"]
    assert fake_gw.config is not None and fake_gw.config["peer"]["hub"] == HUB, "the restored version holds it"

    # A fingerprint this API holds no secret for (another box's backup) is refused, naming where it is.
    doc = json.loads(data)
    doc["versions"][-1]["config"]["peer"]["hub"] = "secret:0123456789abcdef"
    assert login(admin, "admin", STRONG).status_code == 200
    r = admin.post("/api/v1/system/restore", files={"file": ("b.json", io.BytesIO(json.dumps(doc).encode()), "x")})
    assert r.status_code == 422 and r.json()["error"]["code"] == "unknown_secret", r.text
    assert r.json()["error"]["field"] == f"file.versions[{len(doc['versions']) - 1}].config.peer.hub"


# --- the upgrade -----------------------------------------------------------------------------------------------


def legacy_terminal(enabled: bool) -> dict[str, Any]:
    cfg = lab_config("terminal").to_json()
    cfg["peer"] = {
        "enabled": enabled,
        "port": 7072,
        "hub": "10.71.2.2",
        "key": LEGACY_KEY,
        "allowed": [],
        "pool_size": 8,
    }
    return cfg


def legacy_database(settings: Settings) -> None:
    """A database as the API before per-terminal identities left it: versions holding the shared key."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    cfg = Config()
    cfg.set_main_option("script_location", str(alembic_dir()))
    cfg.set_main_option("sqlalchemy.url", settings.database_url)
    command.upgrade(cfg, "0005")
    hub = lab_config("hub").to_json()
    hub["peer"] = {
        "enabled": True,
        "port": 7072,
        "hub": "",
        "key": LEGACY_KEY,
        "allowed": ["10.71.2.1/32"],
        "pool_size": 8,
    }
    rows = [
        (1, hub, "hub with the shared key", "applied"),
        (2, legacy_terminal(True), "terminal with the shared key", "none"),
        (3, {**legacy_terminal(False), "revision": "from-the-gateway"}, "imported from the gateway at ...", "applied"),
    ]
    with sqlite3.connect(settings.database_path) as db:
        for vid, config, comment, status in rows:
            db.execute(
                "INSERT INTO config_versions (id, config, author, comment, created_at, apply_status) "
                "VALUES (?, ?, 'someone', ?, 1700000000, ?)",
                (vid, json.dumps(config), comment, status),
            )
        db.execute("INSERT INTO meta (key, value) VALUES ('active_version', '3')")


def test_the_upgrade_scrubs_the_shared_key_from_every_stored_version(tmp_path: Path, fake_gw: FakeGateway) -> None:
    settings = make_settings(tmp_path / "data", fake_gw.socket_path)
    legacy_database(settings)
    app = create_app(settings)  # migrates to head
    try:
        with sqlite3.connect(settings.database_path) as db:
            stored = {
                vid: (json.loads(c), comment)
                for vid, c, comment in db.execute("SELECT id, config, comment FROM config_versions")
            }
            raw = db.execute("SELECT group_concat(config) FROM config_versions").fetchone()[0]
        assert LEGACY_KEY not in raw
        for config, _ in stored.values():
            assert "key" not in config["peer"] and "allowed" not in config["peer"]
        assert stored[1][0]["peer"]["enabled"] is True, "a hub keeps listening (for enrolled terminals only)"
        assert stored[2][0]["peer"]["enabled"] is False, "a terminal waits for its hub's identity"
        assert "shared peer key was removed" in stored[2][1] and "peer path is off" in stored[2][1]
        assert "shared peer key was removed" in stored[3][1]
        c = new_client(app)
        assert login(c, "admin", one_time_password(settings)).status_code == 200
        c.post(
            "/api/v1/auth/change-password",
            json={"current_password": one_time_password(settings), "new_password": STRONG},
        )
        for vid in (1, 2, 3):
            r = c.get(f"/api/v1/versions/{vid}")
            assert r.status_code == 200 and LEGACY_KEY not in r.text, r.text
    finally:
        app.state.ctx.db.dispose()


def test_a_backup_from_before_the_upgrade_restores_without_the_key(admin: TestClient) -> None:
    backup = admin.get("/api/v1/system/backup").json()
    backup["versions"].append(
        {
            "id": 99,
            "config": legacy_terminal(True),
            "author": "someone",
            "comment": "old",
            "created_at": 1_700_000_000.0,
            "apply_status": "none",
            "apply_result": None,
            "applied_at": None,
        }
    )
    r = admin.post("/api/v1/system/restore", files={"file": ("old.json", io.BytesIO(json.dumps(backup).encode()), "x")})
    assert r.status_code == 200, r.text
    assert login(admin, "admin", STRONG).status_code == 200
    v = admin.get("/api/v1/versions/99").json()
    assert "key" not in v["config"]["peer"] and v["config"]["peer"]["enabled"] is False
    assert "shared peer key was removed" in v["comment"]
    assert LEGACY_KEY not in admin.get("/api/v1/system/backup").text
