"""The API's files that hold secrets are its user's alone: the database (password hashes, the config history, the
key of secret fingerprints) and SQLite's files beside it, the first admin's one-time password, the fleet CA's and
the API's private keys."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.testclient import TestClient

from perigee_api.core.config import Settings
from perigee_api.main import create_app
from perigee_fakes.fake_gateway import FakeGateway
from tests.conftest import make_settings


def test_the_database_is_the_api_users_alone(app: FastAPI, admin: TestClient, settings: Settings) -> None:
    """Password hashes, the config history and the key of secret fingerprints: mode 0600, its -wal and -shm too."""
    admin.post("/api/v1/policy/classes", json={"name": "web", "priority": 100, "action": "accelerate"})
    path = settings.database_path
    for f in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        assert f.exists(), f
        assert oct(f.stat().st_mode & 0o777) == "0o600", f


def test_an_existing_database_is_tightened_at_start(tmp_path: Path, fake_gw: FakeGateway) -> None:
    settings = make_settings(tmp_path / "data", fake_gw.socket_path)
    settings.data_dir.mkdir(parents=True)
    settings.database_path.touch(mode=0o644)
    settings.database_path.chmod(0o644)
    app = create_app(settings)
    try:
        assert oct(settings.database_path.stat().st_mode & 0o777) == "0o600"
    finally:
        app.state.ctx.db.dispose()


def test_the_fleet_keys_and_the_one_time_password_are_the_api_users_alone(
    app: FastAPI, admin: TestClient, settings: Settings
) -> None:
    assert admin.post("/api/v1/fleet/gateways", json={"name": "gw2", "address": "127.0.0.1:7443"}).status_code == 201
    fleet = settings.data_dir / "fleet"
    assert oct(fleet.stat().st_mode & 0o777) == "0o700"
    for key in ("ca.key", "client.key"):
        assert oct((fleet / key).stat().st_mode & 0o777) == "0o600", key
    if settings.initial_password_file.exists():
        assert oct(settings.initial_password_file.stat().st_mode & 0o777) == "0o600"
