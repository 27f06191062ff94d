"""Hostile values: absurd floats, wrong JSON types, deep nesting, endless streams, stale bad rows."""

from __future__ import annotations

import io
import time
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from perigee_api.models import BodProfile
from perigee_fakes.fake_gateway import FakeGateway, make_flow
from satlab.testing import HUNG_S
from tests.running_api import log_in_as_admin, running_api, unix_client
from tests.test_bod import GEO


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("superframe_ms", 5e-324),
        ("superframe_ms", 7e-306),
        ("superframe_ms", 0.5),
        ("base_rtt_ms", 5e-324),
        ("allocation_delay_ms", 5e-324),
        ("allocation_delay_ms", 0.2),
        ("superframe_ms", 1e308),
        ("forward_rate_bps", True),
        ("forward_rate_bps", "50000000"),
        ("forward_rate_bps", 5e7),
        ("superframe_ms", "26.5"),
    ],
)
def test_bod_inputs_outside_physics_or_of_the_wrong_type_are_422_and_not_stored(
    operator: TestClient, field: str, value: object
) -> None:
    body = {"name": "hostile", "inputs": {**GEO, field: value}}
    for path in ("/api/v1/bod/derive", "/api/v1/bod/profiles"):
        r = operator.post(path, json=body)
        assert r.status_code == 422, (path, r.text)
        assert field in (r.json()["error"]["field"] or ""), r.text
    r = operator.get("/api/v1/bod/profiles")
    assert r.status_code == 200 and r.json() == []


def test_a_bad_row_stored_earlier_does_not_take_the_list_down(app: FastAPI, operator: TestClient) -> None:
    assert operator.post("/api/v1/bod/profiles", json={"name": "good", "inputs": GEO}).status_code == 201
    with app.state.ctx.db.session() as db:  # what the old, looser validation let through
        now = time.time()
        db.add(
            BodProfile(
                name="stale", inputs={**GEO, "superframe_ms": 5e-324}, overrides={}, created_at=now, updated_at=now
            )
        )
        db.commit()
    r = operator.get("/api/v1/bod/profiles")
    assert r.status_code == 200, r.text
    by_name = {p["name"]: p for p in r.json()}
    assert by_name["good"]["tuning"] is not None and by_name["good"]["problem"] is None
    stale = by_name["stale"]
    assert stale["tuning"] is None and "superframe_ms" in stale["problem"]
    assert operator.get(f"/api/v1/bod/profiles/{stale['id']}").status_code == 200
    r = operator.post(f"/api/v1/bod/profiles/{stale['id']}/apply-to-config", json={})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_profile"
    # Fixing it through the API works; deleting it does too.
    r = operator.put(f"/api/v1/bod/profiles/{stale['id']}", json={"name": "stale", "inputs": GEO})
    assert r.status_code == 200 and r.json()["tuning"] is not None
    assert operator.delete(f"/api/v1/bod/profiles/{stale['id']}").status_code == 204


@pytest.mark.parametrize("priority", [True, "5", 5.0, None])
def test_request_models_take_json_types_as_they_are(operator: TestClient, priority: object) -> None:
    r = operator.post("/api/v1/policy/classes", json={"name": "web", "priority": priority, "action": "accelerate"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "body.priority", r.text
    assert operator.get("/api/v1/policy/classes").json()["classes"] == []


def test_strict_booleans_and_strings(admin: TestClient) -> None:
    r = admin.post("/api/v1/users", json={"username": "x1", "role": "viewer", "password": 123456789012345})
    assert r.status_code == 422 and r.json()["error"]["field"] == "body.password"
    r = admin.post("/api/v1/cache/purge", json={"all": 1})
    assert r.status_code == 422 and r.json()["error"]["field"] == "body.all"


def deep(n: int) -> bytes:
    return b"[" * n + b"]" * n


def test_deeply_nested_restore_is_a_clear_4xx(admin: TestClient) -> None:
    files = {"file": ("backup.json", io.BytesIO(deep(100_000)), "application/json")}
    r = admin.post("/api/v1/system/restore", files=files)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "bad_json" and "nested" in r.json()["error"]["message"]
    obj = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    r = admin.post("/api/v1/system/restore", files={"file": ("b.json", io.BytesIO(obj), "application/json")})
    assert r.status_code == 422, r.text


def test_deeply_nested_json_bodies_are_a_clear_4xx(admin: TestClient) -> None:
    for path in ("/api/v1/config", "/api/v1/policy/classes"):
        method = admin.put if path.endswith("config") else admin.post
        r = method(path, content=deep(100_000), headers={"Content-Type": "application/json"})
        assert 400 <= r.status_code < 500, (path, r.status_code, r.text)
        assert "error" in r.json()
    # Deep but under the recursion limit: pydantic's own guard, still a 4xx.
    r = admin.put("/api/v1/config", content=deep(900), headers={"Content-Type": "application/json"})
    assert 400 <= r.status_code < 500, r.text


def test_no_swagger_ui_that_the_csp_would_break(app: FastAPI, admin: TestClient) -> None:
    for c in (TestClient(app, base_url="https://testserver"), admin):
        r = c.get("/api/v1/docs")
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    assert admin.get("/api/v1/openapi.json").status_code == 200


def test_streams_are_bounded_and_capped_per_user(tmp_path: Path, sock_dir: Path, fake_gw: FakeGateway) -> None:
    """max_events=0 (forever) is gone, every stream ends after the server's bound, and each user holds at most
    `streams_per_user` open at once (the real server: concurrent connections on its Unix socket)."""
    fake_gw.live_flows = [make_flow(1)]
    data = tmp_path / "data"
    env = {
        "PERIGEE_COLLECTOR_ENABLED": "true",
        "PERIGEE_COLLECT_INTERVAL_S": "0.1",
        "PERIGEE_STREAM_MAX_EVENTS": "3",
        "PERIGEE_STREAMS_PER_USER": "2",
    }
    with running_api(data, sock_dir / "api.sock", fake_gw.socket_path, **env) as sock, unix_client(sock) as c:
        log_in_as_admin(c, data)
        r = c.get("/api/v1/flows/stream", params={"max_events": 0})
        assert r.status_code == 422 and r.json()["error"]["field"] == "query.max_events"
        # No max_events: the server's bound (3 here), then the stream ends by itself.
        with c.stream("GET", "/api/v1/flows/stream", params={"interval_s": 0.1}, timeout=20) as s:
            assert s.status_code == 200
            events = [line for line in s.iter_lines() if line.startswith("event: flows")]
        assert len(events) == 3
        # Two open streams per user; the third is refused until one closes.
        timeout = httpx.Timeout(20)
        with (
            c.stream("GET", "/api/v1/flows/stream", timeout=timeout) as a,
            c.stream("GET", "/api/v1/flows/stream", timeout=timeout) as b,
        ):
            assert a.status_code == b.status_code == 200
            r = c.get("/api/v1/flows/stream", timeout=timeout)
            assert r.status_code == 429 and r.json()["error"]["code"] == "too_many_streams"
        # Closed by the client: the slots come back.
        deadline = time.time() + HUNG_S
        while True:
            with c.stream("GET", "/api/v1/flows/stream", params={"max_events": 1}, timeout=timeout) as s:
                if s.status_code == 200:
                    break
            assert time.time() < deadline, "stream slots were not given back"
            time.sleep(0.2)
