"""Role enforcement on every write route, found by walking app.routes (new routes are covered too)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}
# Self-service routes every logged-in user may use.
SELF_SERVICE = {"/api/v1/auth/login", "/api/v1/auth/logout", "/api/v1/auth/change-password"}
# The route a terminal redeems its enrollment token on: no session, the token is the credential
# (test_enrollment_tokens.py); and the one a managed terminal reports to its hub on, its management key the
# credential (test_managed_terminals.py).
NO_SESSION = {"/api/v1/peer/enroll", "/api/v1/managed/report"}
# POSTs that store nothing (a derivation for the BoD page): every role may read what they answer.
READ_ONLY_POSTS = {"/api/v1/bod/derive"}
ADMIN_ONLY_PREFIXES = ("/api/v1/users", "/api/v1/system/restore")


def walk(routes: list[Any], prefix: str = "") -> Iterator[tuple[str, APIRoute]]:
    """Every APIRoute with its full path; FastAPI >= 0.16x nests included routers in app.routes."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield prefix + route.path, route
        elif hasattr(route, "original_router"):  # an included router
            yield from walk(route.original_router.routes, prefix + route.include_context.prefix)


def unsafe_routes(app: FastAPI) -> list[tuple[str, str]]:
    out = []
    for path, route in walk(app.routes):
        for method in sorted(route.methods & UNSAFE):
            if path not in SELF_SERVICE | READ_ONLY_POSTS | NO_SESSION:
                out.append((method, re.sub(r"\{[^}]+\}", "1", path)))
    return out


def test_walk_matches_openapi(app: FastAPI) -> None:
    documented = {(m.upper(), p) for p, ops in app.openapi()["paths"].items() for m in ops}
    walked = {(m, p) for p, r in walk(app.routes) for m in r.methods if m != "HEAD"}
    assert documented == walked


def test_there_are_write_routes(app: FastAPI) -> None:
    assert len(unsafe_routes(app)) >= 20


def test_viewer_gets_403_on_every_write_route(app: FastAPI, viewer: TestClient) -> None:
    before = viewer.get("/api/v1/versions").json()["total"]
    for method, path in unsafe_routes(app):
        r = viewer.request(method, path, json={})
        assert r.status_code == 403, (method, path, r.status_code, r.text)
        assert r.json()["error"]["code"] == "forbidden_role", (method, path, r.text)
    assert viewer.get("/api/v1/versions").json()["total"] == before  # nothing written


def test_a_viewer_reads_what_a_read_only_post_answers(viewer: TestClient) -> None:
    inputs = {
        "forward_rate_bps": 50_000_000,
        "return_cra_bps": 1_000_000,
        "return_rbdc_max_bps": 4_000_000,
        "superframe_ms": 26.5,
        "allocation_delay_ms": 250,
        "base_rtt_ms": 560,
        "terminal_buffer_bytes": 262_144,
    }
    before = viewer.get("/api/v1/versions").json()["total"]
    assert viewer.post("/api/v1/bod/derive", json={"name": "x", "inputs": inputs}).status_code == 200
    assert viewer.get("/api/v1/versions").json()["total"] == before


def test_operator_gets_403_on_admin_routes(app: FastAPI, operator: TestClient) -> None:
    for method, path in unsafe_routes(app):
        if path.startswith(ADMIN_ONLY_PREFIXES):
            r = operator.request(method, path, json={})
            assert r.status_code == 403, (method, path, r.text)
    assert operator.get("/api/v1/users").status_code == 403
    assert operator.get("/api/v1/audit").status_code == 403
    assert operator.get("/api/v1/system/backup").status_code == 403


def test_viewer_can_read(viewer: TestClient) -> None:
    for path in (
        "/api/v1/versions",
        "/api/v1/policy/classes",
        "/api/v1/policy/bypass",
        "/api/v1/config",
        "/api/v1/flows",
        "/api/v1/bod/profiles",
        "/api/v1/stats/series?metric=link_bps",
    ):
        assert viewer.get(path).status_code == 200, path


def test_anonymous_gets_401(app: FastAPI) -> None:
    c = TestClient(app, base_url="https://testserver")
    assert c.get("/api/v1/versions").status_code == 401
    assert c.get("/api/v1/health").status_code == 200
