"""API tokens expire, are scoped (read, operator; never admin) and end with their owner's password; passwords
are checked against the packaged common-password list and an estimate of how easy they are to guess."""

from __future__ import annotations

import time

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from perigee_api.models import ApiToken
from perigee_api.services import password_policy
from tests.conftest import STRONG

WRITE = "/api/v1/policy/bypass/restore-builtins"


def bearer(app: FastAPI, secret: str) -> TestClient:
    return TestClient(app, base_url="https://testserver", headers={"Authorization": f"Bearer {secret}"})


def make_token(c: TestClient, **body: object) -> dict:
    r = c.post("/api/v1/tokens", json={"name": "auto", **body})
    assert r.status_code == 201, r.text
    return r.json()


def test_tokens_expire(app: FastAPI, operator: TestClient) -> None:
    made = make_token(operator, scope="operator", expires_in_days=7)
    assert 6.9 * 86400 < made["token"]["expires_at"] - time.time() <= 7 * 86400
    bot = bearer(app, made["secret"])
    assert bot.get("/api/v1/versions").status_code == 200
    with app.state.ctx.db.session() as db:
        db.query(ApiToken).update({ApiToken.expires_at: time.time() - 1})
        db.commit()
    r = bot.get("/api/v1/versions")
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_token"
    # Default 90 days; more than the server's maximum is refused.
    assert 89 * 86400 < make_token(operator)["token"]["expires_at"] - time.time() <= 90 * 86400
    r = operator.post("/api/v1/tokens", json={"name": "forever", "expires_in_days": 3650})
    assert r.status_code == 422 and r.json()["error"]["field"] == "expires_in_days"


def test_read_scope_is_get_only(app: FastAPI, operator: TestClient) -> None:
    made = make_token(operator)  # default scope: read
    assert made["token"]["scope"] == "read"
    bot = bearer(app, made["secret"])
    assert bot.get("/api/v1/policy/classes").status_code == 200
    r = bot.post(WRITE)
    assert r.status_code == 403 and r.json()["error"]["code"] == "token_scope"
    ops = bearer(app, make_token(operator, scope="operator")["secret"])
    assert ops.post(WRITE).status_code == 200


def test_tokens_never_act_as_admin_nor_make_tokens(app: FastAPI, admin: TestClient) -> None:
    bot = bearer(app, make_token(admin, scope="operator")["secret"])
    assert bot.post(WRITE).status_code == 200  # operator work: yes
    for r in (bot.get("/api/v1/users"), bot.get("/api/v1/system/backup"), bot.get("/api/v1/audit")):
        assert r.status_code == 403 and r.json()["error"]["code"] == "token_scope", r.text
    r = bot.post("/api/v1/tokens", json={"name": "child", "scope": "operator"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "token_scope"
    r = bot.post("/api/v1/auth/change-password", json={"current_password": STRONG, "new_password": STRONG + "-x"})
    assert r.status_code == 403


def test_password_change_revokes_the_users_tokens(app: FastAPI, admin: TestClient, operator: TestClient) -> None:
    own = bearer(app, make_token(operator, scope="operator")["secret"])
    others = bearer(app, make_token(admin, scope="operator")["secret"])
    r = operator.post(
        "/api/v1/auth/change-password",
        json={"current_password": STRONG + "otto", "new_password": "a-fresh-orbit-for-otto-2026"},
    )
    assert r.status_code == 200, r.text
    r = own.get("/api/v1/versions")
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_token"
    assert others.get("/api/v1/versions").status_code == 200  # another user's tokens stay
    # An admin's reset of a user's password ends that user's tokens too.
    victim = bearer(app, make_token(admin, scope="read")["secret"])
    user_id = admin.get("/api/v1/auth/me").json()["id"]
    otto = next(u for u in admin.get("/api/v1/users").json() if u["username"] == "otto")
    otto_bot = bearer(app, make_token(operator, scope="read")["secret"])
    assert admin.patch(f"/api/v1/users/{otto['id']}", json={"reset_password": True}).status_code == 200
    assert otto_bot.get("/api/v1/versions").status_code == 401
    assert victim.get("/api/v1/versions").status_code == 200 and user_id != otto["id"]


@pytest.mark.parametrize(
    "weak",
    ["aaaaaaaaaaaa", "password1234", "123456789012", "qwertyuiopas", "admin-admin-admin", "perigeeperigee"],
)
def test_common_and_guessable_passwords_are_refused(admin: TestClient, weak: str) -> None:
    assert password_policy.problem(weak, "someone") is not None
    r = admin.post("/api/v1/users", json={"username": "weakling", "role": "viewer", "password": weak})
    assert r.status_code == 422 and r.json()["error"]["code"] == "weak_password", r.text
    r = admin.post("/api/v1/auth/change-password", json={"current_password": STRONG, "new_password": weak})
    assert r.status_code == 422 and r.json()["error"]["field"] == "new_password", r.text


def test_good_passwords_pass_and_long_ones_are_judged_quickly() -> None:
    for good in (STRONG, "e2e-Perigee-orbit-2026", "zq8#Lm2!pX0v-satellite"):
        assert password_policy.problem(good, "admin") is None, good
    assert "at least 12" in (password_policy.problem("short-pw", "admin") or "")
    assert password_policy.problem("orbit" * 50 + "x", "admin") is not None  # 251 chars of one repeated word
    start = time.perf_counter()
    password_policy.problem("k" * 256, "admin")
    assert time.perf_counter() - start < 2
