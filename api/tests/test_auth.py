from __future__ import annotations

import stat

from fastapi import FastAPI
from fastapi.testclient import TestClient

from perigee_api.core.config import Settings
from tests.conftest import STRONG, login, new_client, one_time_password


def test_first_admin_one_time_password_file_is_private(app: FastAPI, settings: Settings) -> None:
    f = settings.initial_password_file
    assert f.exists()
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert len(one_time_password(settings)) >= 16


def test_one_time_password_must_be_changed(app: FastAPI, settings: Settings) -> None:
    c = new_client(app)
    otp = one_time_password(settings)
    r = login(c, "admin", otp)
    assert r.status_code == 200 and r.json()["must_change_password"] is True
    for path in ("/api/v1/versions", "/api/v1/policy/classes", "/api/v1/users"):
        r = c.get(path)
        assert r.status_code == 403 and r.json()["error"]["code"] == "password_change_required", path
    assert c.post("/api/v1/policy/bypass/restore-builtins").json()["error"]["code"] == "password_change_required"
    assert c.get("/api/v1/auth/me").status_code == 200
    r = c.post("/api/v1/auth/change-password", json={"current_password": otp, "new_password": "short"})
    assert r.status_code == 422 and r.json()["error"]["field"]
    r = c.post("/api/v1/auth/change-password", json={"current_password": otp, "new_password": STRONG})
    assert r.status_code == 200
    assert c.get("/api/v1/versions").status_code == 200
    assert not settings.initial_password_file.exists()
    # the one-time password is gone for good
    assert login(new_client(app), "admin", otp).status_code == 401


def test_cookie_flags_and_session_rotation(app: FastAPI, settings: Settings, admin: TestClient) -> None:
    c = new_client(app)
    c.cookies.set("perigee_session", "attacker-chosen-id", domain="testserver.local")
    r = login(c, "admin", STRONG)
    assert r.status_code == 200
    cookies = r.headers.get_list("set-cookie")
    sess = next(h for h in cookies if h.startswith("perigee_session="))
    csrf = next(h for h in cookies if h.startswith("perigee_csrf="))
    low = sess.lower()
    assert "httponly" in low and "secure" in low and "samesite=strict" in low
    assert "httponly" not in csrf.lower() and "samesite=strict" in csrf.lower()
    first = sess.split(";")[0].split("=", 1)[1]
    assert first != "attacker-chosen-id"
    # logging in again issues a different session id, and the old one stops working
    r2 = login(c, "admin", STRONG)
    second = next(h for h in r2.headers.get_list("set-cookie") if h.startswith("perigee_session="))
    second_id = second.split(";")[0].split("=", 1)[1]
    assert second_id != first
    stale = new_client(app)
    stale.cookies.set("perigee_session", first)
    assert stale.get("/api/v1/auth/me").status_code == 401


def test_csrf_required_on_unsafe_methods(admin: TestClient) -> None:
    token = admin.headers.pop("X-CSRF-Token")
    r = admin.post("/api/v1/policy/bypass/restore-builtins")
    assert r.status_code == 403 and r.json()["error"]["code"] == "csrf_failed"
    r = admin.post("/api/v1/policy/bypass/restore-builtins", headers={"X-CSRF-Token": "wrong"})
    assert r.status_code == 403
    r = admin.post("/api/v1/policy/bypass/restore-builtins", headers={"X-CSRF-Token": token})
    assert r.status_code == 200
    # a login without the double-submit pair is refused too
    fresh = TestClient(admin.app, base_url="https://testserver")
    r = fresh.post("/api/v1/auth/login", json={"username": "admin", "password": STRONG})
    assert r.status_code == 403


def test_csrf_token_bound_to_session(app: FastAPI, admin: TestClient) -> None:
    # a matching cookie/header pair that is not the session's token is refused
    admin.cookies.set("perigee_csrf", "forged")
    r = admin.post("/api/v1/policy/bypass/restore-builtins", headers={"X-CSRF-Token": "forged"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "csrf_failed"


def test_bearer_token_needs_no_csrf_and_is_stored_hashed(app: FastAPI, admin: TestClient) -> None:
    r = admin.post("/api/v1/tokens", json={"name": "ci", "scope": "operator"})
    assert r.status_code == 201
    secret = r.json()["secret"]
    with app.state.ctx.db.session() as db:
        from perigee_api.models import ApiToken

        stored = db.query(ApiToken).one()
        assert secret not in (stored.token_hash, stored.prefix) and len(stored.token_hash) == 64
    bot = TestClient(app, base_url="https://testserver", headers={"Authorization": f"Bearer {secret}"})
    assert bot.post("/api/v1/policy/bypass/restore-builtins").status_code == 200
    bad = TestClient(app, base_url="https://testserver", headers={"Authorization": "Bearer nope"})
    assert bad.get("/api/v1/versions").status_code == 401


def client_from(app: FastAPI, address: str) -> TestClient:
    """A client whose TCP peer is `address`: the address the API keys its throttle and audit on."""
    return TestClient(app, base_url="https://testserver", client=(address, 40000))


def fail_logins(app: FastAPI, address: str, username: str, n: int) -> list[int]:
    c = client_from(app, address)
    return [login(c, username, "wrong-password!").status_code for _ in range(n)]


def test_failures_elsewhere_never_lock_the_user_out(app: FastAPI, admin: TestClient, settings: Settings) -> None:
    """An attacker hammering admin's name from one address slows down only that address."""
    attacker = "198.51.100.66"
    codes = fail_logins(app, attacker, "admin", settings.login_free_failures + 6)
    assert codes[: settings.login_free_failures] == [401] * settings.login_free_failures
    assert 429 in codes  # the attacker's own address now waits
    r = login(client_from(app, attacker), "admin", STRONG)  # even with the right password, from there
    assert r.status_code == 429 and r.json()["error"]["code"] == "login_throttled"
    assert int(r.headers["Retry-After"]) >= 1
    # The operator, from their own address, is not affected at all.
    assert login(client_from(app, "192.0.2.10"), "admin", STRONG).status_code == 200
    entries = admin.get("/api/v1/audit", params={"action": "login"}).json()["entries"]
    assert any(e["result"] == "login_throttled" and e["address"] == attacker for e in entries)
    assert any(e["result"] == "bad_credentials" and e["address"] == attacker for e in entries)


def test_backoff_doubles_and_a_success_resets_the_pair(app: FastAPI, admin: TestClient, settings: Settings) -> None:
    import time as clock

    from perigee_api.services import throttle

    free = settings.login_free_failures
    assert [throttle.backoff_s(n, free, 1.0, 900.0) for n in (0, free - 1, free, free + 1, free + 3)] == [
        0.0,
        0.0,
        1.0,
        2.0,
        8.0,
    ]
    assert throttle.backoff_s(free + 400, free, 1.0, 900.0) == 900.0  # capped, no overflow
    address = "203.0.113.5"
    with app.state.ctx.db.session() as db:
        now = clock.time()
        for i in range(free + 3):  # the last failure just now: 2^3 s to wait
            throttle.note(db, "admin", address, False, now=now - 0.001 * (free + 3 - i))
        db.commit()
        v = throttle.check(db, settings, "admin", address, now)
        assert not v.allowed and v.reason == "login_throttled" and v.retry_after_s == 8
        # After the wait, one more try is allowed; an older success does not reset newer failures.
        assert throttle.check(db, settings, "admin", address, now + 9).allowed
        throttle.note(db, "admin", address, True, now=now + 9)
        db.commit()
        assert throttle.check(db, settings, "admin", address, now + 9.5).allowed


def test_spraying_many_users_from_one_address_slows_that_address(
    app: FastAPI, admin: TestClient, settings: Settings
) -> None:
    address = "198.51.100.99"
    c = client_from(app, address)
    codes = [
        login(c, f"nobody{i}", "wrong-password!").status_code for i in range(settings.login_free_failures_address + 1)
    ]
    assert codes[: settings.login_free_failures_address] == [401] * settings.login_free_failures_address
    r = login(c, "someone-else", "whatever-password")
    assert r.status_code == 429 and r.json()["error"]["code"] == "address_throttled"
    assert login(client_from(app, "192.0.2.11"), "admin", STRONG).status_code == 200


def test_change_password_is_throttled_like_login(app: FastAPI, admin: TestClient, settings: Settings) -> None:
    codes = []
    for _ in range(settings.login_free_failures + 3):
        r = admin.post(
            "/api/v1/auth/change-password",
            json={"current_password": "not-the-password", "new_password": "a-new-orbit-for-perigee"},
        )
        codes.append(r.status_code)
    assert codes[: settings.login_free_failures] == [422] * settings.login_free_failures
    assert codes[-1] == 429, codes
    # The guesses count for logging in from that address too: it is the same secret.
    r = login(new_client(app), "admin", STRONG)
    assert r.status_code == 429 and r.json()["error"]["code"] == "login_throttled"


def test_logout_ends_session(admin: TestClient) -> None:
    assert admin.post("/api/v1/auth/logout").status_code == 200
    assert admin.get("/api/v1/auth/me").status_code == 401
