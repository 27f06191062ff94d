"""Property-based fuzzing of every documented operation, in-process over ASGI: no 5xx allowed.

Authenticated as an admin through a browser session (cookie and CSRF header; API tokens never act as admin).
Operations that could cut our own access (logging out, deleting users, changing users or passwords) still run:
access is re-established before each case.
The live SSE stream is excluded (it never ends by design; tests/test_stats.py covers it).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from perigee_api.core import security
from perigee_api.main import create_app
from perigee_api.models import BrowserSession, LoginAttempt, User
from perigee_fakes.fake_gateway import FakeGateway
from tests.conftest import make_settings

SESSION_ID = "schemathesis-fuzzing-session-0123456789"
CSRF = "schemathesis-fuzzing-csrf-0123456789"
HASH = security.hash_password("fuzz-password-not-used-0123")
AUTH = {
    "Cookie": f"{security.SESSION_COOKIE}={SESSION_ID}; {security.CSRF_COOKIE}={CSRF}",
    security.CSRF_HEADER: CSRF,
}


@pytest.fixture(scope="module")
def fuzz_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FastAPI]:
    import shutil
    import tempfile

    sock = Path(tempfile.mkdtemp(prefix="pgf", dir="/tmp"))
    with FakeGateway(sock / "c.sock") as gw:
        application = create_app(make_settings(tmp_path_factory.mktemp("fuzz"), gw.socket_path))
        yield application
        application.state.ctx.db.dispose()
    shutil.rmtree(sock, ignore_errors=True)


def ensure_access(app: FastAPI) -> None:
    with app.state.ctx.db.session() as db:
        user = db.query(User).filter(User.username == "fuzzer").one_or_none()
        if user is None:
            user = User(username="fuzzer", password_hash=HASH, role="admin", created_at=time.time())
            db.add(user)
            db.flush()
        user.role, user.disabled, user.must_change_password = "admin", False, False
        user.password_hash = HASH
        if db.get(BrowserSession, security.digest(SESSION_ID)) is None:
            now = time.time()
            db.add(
                BrowserSession(
                    id_hash=security.digest(SESSION_ID),
                    user_id=user.id,
                    csrf_token=CSRF,
                    created_at=now,
                    expires_at=now + 3600,
                    address="fuzz",
                )
            )
        db.query(LoginAttempt).delete()
        db.commit()


@pytest.fixture(scope="module")
def api_schema(fuzz_app: FastAPI) -> Any:
    ensure_access(fuzz_app)
    return schemathesis.openapi.from_asgi("/api/v1/openapi.json", fuzz_app).exclude(path="/api/v1/flows/stream")


def test_no_server_errors(api_schema: Any, fuzz_app: FastAPI) -> None:
    # schemathesis' pytest plugin does not support this pytest yet: drive hypothesis per operation.
    failures: list[str] = []
    ran = 0
    for result in api_schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(
            max_examples=25,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def run(case: Any) -> None:
            ensure_access(fuzz_app)
            case.call_and_validate(headers=AUTH, checks=[not_a_server_error])

        try:
            run()
        except Exception as exc:  # collect every operation's failure, then report them all
            failures.append(f"{operation.label}: {str(exc)[:2000]}")
        ran += 1
    assert ran >= 40
    # The fuzzing really was authenticated: the admin's session made successful writes.
    from perigee_api.models import AuditEntry

    with fuzz_app.state.ctx.db.session() as db:
        ok_writes = db.query(AuditEntry).filter(AuditEntry.actor == "fuzzer", AuditEntry.result == "ok").count()
    assert ok_writes >= 10, ok_writes
    assert not failures, "\n\n".join(failures)
