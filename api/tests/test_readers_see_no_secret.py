"""From the attacker's side: a viewer's session and a read-scoped API token (and, beyond the issue, an operator and
an admin) read every GET route of the OpenAPI, every version, every user; no answer holds a secret. The secrets
planted: the shared peer key of the versions from before the upgrade (scrubbed by it), the users' passwords and
argon2 hashes, the session cookie and CSRF token of another user, API tokens, nginx's TLS private key, the fleet
CA's and the API's client private keys, a gateway's key handed out at registration, and the API's key for
secret fingerprints. The one exception by design: the admin's backup carries the users' argon2 hashes (a restore
keeps the logins), never a private key.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from perigee_api.core.config import Settings
from perigee_api.main import create_app
from perigee_fakes.fake_gateway import FakeGateway
from tests.certs import certificate, key_pem, make_key, write_pair
from tests.conftest import STRONG, login, make_settings, make_user, new_client, one_time_password
from tests.test_secrets import LEGACY_KEY, legacy_database

# An endless event stream of live flows (the gateway's flow table, no config): read by test_live_snapshot.
NOT_WALKED = {"/api/v1/flows/stream"}


def key_body(pem: str | bytes) -> str:
    """A private key's first base64 line: what a leak of it would contain."""
    text = pem.decode() if isinstance(pem, bytes) else pem
    return text.strip().splitlines()[1]


def tls_pair(tls_dir: Path) -> str:
    """nginx's certificate and key, as perigee-tls-init leaves them; the key's PEM."""
    key = make_key()
    write_pair(tls_dir, key, certificate(key, "box", not_after=timedelta(days=30), serial=1))
    return key_pem(key)


class World:
    """An API with a history, users, tokens, a fleet gateway and a TLS pair; the secrets it holds."""

    def __init__(self, app: FastAPI, settings: Settings) -> None:
        self.app, self.settings = app, settings
        self.admin = new_client(app)
        assert login(self.admin, "admin", one_time_password(settings)).status_code == 200
        r = self.admin.post(
            "/api/v1/auth/change-password",
            json={"current_password": one_time_password(settings), "new_password": STRONG},
        )
        assert r.status_code == 200, r.text
        self.viewer = make_user(self.admin, app, "vera", "viewer")
        self.operator = make_user(self.admin, app, "otto", "operator")
        self.read_token = self._token("reader", "read")
        operator_token = self._token("automation", "operator")
        reg = self.admin.post("/api/v1/fleet/gateways", json={"name": "gw2", "address": "127.0.0.1:7443"})
        assert reg.status_code == 201, reg.text
        self.gateway_id = reg.json()["gateway"]["id"]
        fleet = settings.data_dir / "fleet"
        with sqlite3.connect(settings.database_path) as db:
            hashes_ = [h for (h,) in db.execute("SELECT password_hash FROM users")]
            fingerprint_key = db.execute("SELECT value FROM meta WHERE key = 'secret_fingerprint_key'").fetchone()[0]
            self.version_ids = [i for (i,) in db.execute("SELECT id FROM config_versions ORDER BY id")]
            self.user_ids = [i for (i,) in db.execute("SELECT id FROM users ORDER BY id")]
        self.password_hashes = set(hashes_)
        self.secrets: dict[str, str] = {
            "the shared peer key of old versions": LEGACY_KEY,
            "a user's password": STRONG,
            "the viewer's password": STRONG + "vera",
            "the admin's session cookie": self.admin.cookies["perigee_session"],
            "the admin's CSRF token": self.admin.headers["X-CSRF-Token"],
            "a read token": self.read_token,
            "an operator token": operator_token,
            "nginx's TLS private key": key_body(tls_pair(settings.tls_dir)),
            "the fleet CA's private key": key_body((fleet / "ca.key").read_text()),
            "the API's fleet client key": key_body((fleet / "client.key").read_text()),
            "gw2's private key, handed out once": key_body(reg.json()["credentials"]["key_pem"]),
            "the API's fingerprint key": fingerprint_key,
            "any private key": "PRIVATE KEY",
        }
        for i, h in enumerate(sorted(self.password_hashes)):
            self.secrets[f"argon2 hash {i}"] = h

    def _token(self, name: str, scope: str) -> str:
        r = self.admin.post("/api/v1/tokens", json={"name": name, "scope": scope})
        assert r.status_code == 201, r.text
        return str(r.json()["secret"])

    def token_client(self) -> TestClient:
        c = new_client(self.app)
        c.headers["Authorization"] = f"Bearer {self.read_token}"
        return c

    def gets(self) -> Iterator[str]:
        """Every GET of the OpenAPI with each path parameter filled in with what exists."""
        spec = self.app.openapi()
        values: dict[str, list[Any]] = {
            "version_id": self.version_ids,
            "user_id": self.user_ids,
            "gateway_id": [self.gateway_id],
        }
        for path, ops in spec["paths"].items():
            op = ops.get("get")
            if op is None or path in NOT_WALKED:
                continue
            filled = [path]
            query: dict[str, Any] = {}
            for p in op.get("parameters", []):
                if p["in"] == "path":
                    options = values.get(p["name"], [1])
                    filled = [f.replace("{" + p["name"] + "}", str(v)) for f in filled for v in options]
                elif p.get("required"):
                    schema = p.get("schema", {})
                    if p["name"] in ("a", "b"):
                        query[p["name"]] = self.version_ids[0] if p["name"] == "a" else self.version_ids[-1]
                    else:
                        query[p["name"]] = (schema.get("enum") or [schema.get("minimum", 1)])[0]
            for f in filled:
                yield f + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


@pytest.fixture
def world(tmp_path: Path, fake_gw: FakeGateway) -> Iterator[World]:
    settings = make_settings(tmp_path / "data", fake_gw.socket_path)
    legacy_database(settings)
    app = create_app(settings)
    try:
        yield World(app, settings)
    finally:
        app.state.ctx.db.dispose()


def leaks(world: World, client: TestClient, allowed: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    found = []
    walked = 0
    for url in world.gets():
        r = client.get(url)
        walked += 1
        assert r.status_code < 500, f"GET {url}: {r.status_code} {r.text[:300]}"
        for what, secret in world.secrets.items():
            if secret in r.text and secret not in allowed:
                found.append(f"GET {url} ({r.status_code}) shows {what}")
    assert walked > 30, f"only {walked} reads walked"
    return found


def test_a_viewer_reads_every_route_and_sees_no_secret(world: World) -> None:
    assert leaks(world, world.viewer) == []


def test_a_read_token_reads_every_route_and_sees_no_secret(world: World) -> None:
    client = world.token_client()
    assert client.get("/api/v1/config").status_code == 200, "the token reads"
    assert leaks(world, client) == []


def test_an_operator_and_an_admin_see_no_secret_either(world: World) -> None:
    assert leaks(world, world.operator) == []
    # The admin's backup holds the users' argon2 hashes, by design; nothing else. Its own CSRF token is its own.
    own = world.password_hashes | {world.secrets["the admin's CSRF token"]}
    assert leaks(world, world.admin, allowed=own) == []
    backup = world.admin.get("/api/v1/system/backup").json()
    assert LEGACY_KEY not in json.dumps(backup) and "PRIVATE KEY" not in json.dumps(backup)


def test_every_read_of_a_secret_bearing_export_is_audited(world: World) -> None:
    world.admin.get("/api/v1/system/backup")
    entries = world.admin.get("/api/v1/audit", params={"limit": 50}).json()["entries"]
    assert any(e["action"] == "GET /api/v1/system/backup" and e["actor"] == "admin" for e in entries)
