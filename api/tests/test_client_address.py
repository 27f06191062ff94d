"""The client address comes from nginx's X-Real-IP only when nginx is the peer; X-Forwarded-For is never read."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from perigee_api.core.client_address import FrontProxies, resolve
from tests.conftest import login
from tests.running_api import running_api, unix_client

SPOOF = "198.51.100.7"


def scope(client: tuple[str, int] | None, server: tuple[str, int | None], headers: dict[str, str]) -> dict:
    return {
        "type": "http",
        "client": client,
        "server": server,
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }


PROXIES = FrontProxies.parse("127.0.0.1, 10.9.0.0/16")


def test_unix_socket_believes_x_real_ip_only() -> None:
    unix = ("/run/perigee-web/api.sock", None)
    assert resolve(scope(None, unix, {"X-Real-IP": "192.0.2.4"}), PROXIES) == "192.0.2.4"
    assert resolve(scope(None, unix, {"X-Forwarded-For": SPOOF}), PROXIES) == "local"
    assert resolve(scope(None, unix, {"X-Real-IP": "not-an-ip"}), PROXIES) == "local"
    # Two X-Real-IP headers: one came from the client (nginx replaces it, never adds a second).
    two = scope(None, unix, {})
    two["headers"] = [(b"x-real-ip", b"192.0.2.4"), (b"x-real-ip", SPOOF.encode())]
    assert resolve(two, PROXIES) == "local"
    assert resolve(scope(None, unix, {"X-Real-IP": "2001:DB8::1"}), PROXIES) == "2001:db8::1"


def test_tcp_believes_only_listed_front_proxies() -> None:
    server = ("127.0.0.1", 8000)
    assert resolve(scope(("127.0.0.1", 5000), server, {"X-Real-IP": "192.0.2.4"}), PROXIES) == "192.0.2.4"
    assert resolve(scope(("10.9.3.4", 5000), server, {"X-Real-IP": "192.0.2.5"}), PROXIES) == "192.0.2.5"
    assert resolve(scope(("203.0.113.9", 5000), server, {"X-Real-IP": SPOOF}), PROXIES) == "203.0.113.9"
    assert resolve(scope(("203.0.113.9", 5000), server, {"X-Forwarded-For": SPOOF}), PROXIES) == "203.0.113.9"


def test_a_wildcard_front_proxy_is_refused() -> None:
    with pytest.raises(ValueError, match="every client"):
        FrontProxies.parse("*")


def test_forwarded_for_spoof_reaches_neither_audit_nor_throttle(app: FastAPI, admin: TestClient) -> None:
    """A client that is not the front proxy names its own address in vain, whichever header it uses."""
    c = TestClient(app, base_url="https://testserver", client=("203.0.113.50", 41000))
    for header in ("X-Forwarded-For", "X-Real-IP"):
        c.headers[header] = SPOOF
        assert login(c, "admin", "wrong-password!").status_code == 401
        del c.headers[header]
    entries = admin.get("/api/v1/audit", params={"action": "login"}).json()["entries"]
    failed = [e for e in entries if e["result"] == "bad_credentials"]
    assert failed and {e["address"] for e in failed} == {"203.0.113.50"}
    with app.state.ctx.db.session() as db:
        from perigee_api.models import LoginAttempt

        assert {a.address for a in db.query(LoginAttempt).filter(LoginAttempt.success.is_(False))} == {"203.0.113.50"}


def test_real_entrypoint_on_a_unix_socket_ignores_forwarded_for(tmp_path: Path, sock_dir: Path) -> None:
    """`python -m perigee_api` as deployed (uvicorn on nginx's Unix socket): X-Forwarded-For is not the address."""
    data = tmp_path / "data"
    with running_api(data, sock_dir / "api.sock", sock_dir / "no-gateway.sock") as sock, unix_client(sock) as c:
        csrf = c.get("/api/v1/auth/csrf").json()["csrf_token"]
        for headers in ({"X-Forwarded-For": SPOOF}, {"X-Real-IP": "192.0.2.77"}):
            r = c.post(
                "/api/v1/auth/login",
                json={"username": "admin", "password": "wrong-password!"},
                headers={"X-CSRF-Token": csrf, **headers},
            )
            assert r.status_code == 401, r.text
    with sqlite3.connect(data / "perigee.sqlite3") as db:
        addresses = [row[0] for row in db.execute("SELECT address FROM audit_log WHERE action = 'login' ORDER BY id")]
    # The first came from a local process without nginx's header; the second carried nginx's X-Real-IP.
    assert addresses == ["local", "192.0.2.77"]
