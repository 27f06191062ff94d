"""Fixtures: a fake gateway on a Unix socket, an app on a real SQLite file, logged-in clients."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from perigee_api.core.config import Settings
from perigee_api.main import create_app
from perigee_fakes.fake_gateway import FakeGateway

STRONG = "correct-horse-battery-staple"


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    # Unix socket paths are limited to 107 bytes: pytest's tmp_path can be longer.
    d = Path(tempfile.mkdtemp(prefix="pgt", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def fake_gw(sock_dir: Path) -> Iterator[FakeGateway]:
    with FakeGateway(sock_dir / "control.sock") as gw:
        yield gw


def make_settings(data_dir: Path, socket: Path, **kw: Any) -> Settings:
    kw.setdefault("tls_dir", data_dir.parent / "tls")  # never the host's /etc/perigee/tls
    kw.setdefault("managed_poll_enabled", False)  # the managed poll thread: only a test that asks for it
    return Settings(data_dir=data_dir, gateway_socket=socket, collector_enabled=False, secure_cookies=True, **kw)


@pytest.fixture
def settings(tmp_path: Path, fake_gw: FakeGateway) -> Settings:
    return make_settings(tmp_path / "data", fake_gw.socket_path)


@pytest.fixture
def app(settings: Settings) -> Iterator[FastAPI]:
    application = create_app(settings)
    yield application
    application.state.ctx.db.dispose()


def new_client(app: FastAPI) -> TestClient:
    return TestClient(app, base_url="https://testserver")


def login(client: TestClient, username: str, password: str) -> Any:
    csrf = client.get("/api/v1/auth/csrf").json()["csrf_token"]
    r = client.post(
        "/api/v1/auth/login",
        json={"username": username, "password": password},
        headers={"X-CSRF-Token": csrf},
    )
    if r.status_code == 200:
        client.headers["X-CSRF-Token"] = r.json()["csrf_token"]
    return r


def one_time_password(settings: Settings) -> str:
    return settings.initial_password_file.read_text().strip()


@pytest.fixture
def admin(app: FastAPI, settings: Settings) -> TestClient:
    c = new_client(app)
    assert login(c, "admin", one_time_password(settings)).status_code == 200
    r = c.post(
        "/api/v1/auth/change-password",
        json={"current_password": one_time_password(settings), "new_password": STRONG},
    )
    assert r.status_code == 200, r.text
    return c


def make_user(admin: TestClient, app: FastAPI, name: str, role: str) -> TestClient:
    r = admin.post("/api/v1/users", json={"username": name, "role": role, "password": STRONG + name})
    assert r.status_code == 201, r.text
    c = new_client(app)
    assert login(c, name, STRONG + name).status_code == 200
    return c


@pytest.fixture
def viewer(admin: TestClient, app: FastAPI) -> TestClient:
    return make_user(admin, app, "vera", "viewer")


@pytest.fixture
def operator(admin: TestClient, app: FastAPI) -> TestClient:
    return make_user(admin, app, "otto", "operator")


def real_gateway_socket() -> str | None:
    return os.environ.get("PERIGEE_TEST_REAL_GATEWAY") or None
