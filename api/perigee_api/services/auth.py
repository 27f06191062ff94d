"""Users, browser sessions, API tokens, login throttling and the first admin's one-time password."""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from perigee_api.core import security
from perigee_api.core.config import Settings
from perigee_api.models import ApiToken, BrowserSession, LoginAttempt, User

log = logging.getLogger("perigee_api.auth")

ROLES = ("viewer", "operator", "admin")
ROLE_RANK = {r: i for i, r in enumerate(ROLES)}


def role_at_least(role: str, needed: str) -> bool:
    return ROLE_RANK.get(role, -1) >= ROLE_RANK[needed]


@dataclass
class Throttle:
    locked: bool
    reason: str = ""
    retry_after_s: int = 0


def check_throttle(db: Session, settings: Settings, username: str, address: str, now: float) -> Throttle:
    """Lock a user after N failures in the window, and an address after M (both for lockout_s)."""
    since = now - max(settings.login_window_s, settings.lockout_s)

    def failures(column: str, value: str) -> tuple[int, float | None]:
        col = getattr(LoginAttempt, column)
        last_ok = db.scalar(select(func.max(LoginAttempt.ts)).where(col == value, LoginAttempt.success.is_(True)))
        start = max(since, last_ok or 0.0)
        row = db.execute(
            select(func.count(), func.max(LoginAttempt.ts)).where(
                col == value, LoginAttempt.success.is_(False), LoginAttempt.ts > start
            )
        ).one()
        return int(row[0]), row[1]

    n_user, last_user = failures("username", username)
    if n_user >= settings.login_max_failures_user and last_user is not None:
        left = int(last_user + settings.lockout_s - now) + 1
        if left > 0:
            return Throttle(True, "user_locked", left)
    n_addr, last_addr = failures("address", address)
    if n_addr >= settings.login_max_failures_address and last_addr is not None:
        left = int(last_addr + settings.lockout_s - now) + 1
        if left > 0:
            return Throttle(True, "address_locked", left)
    return Throttle(False)


def note_attempt(db: Session, username: str, address: str, success: bool) -> None:
    db.add(LoginAttempt(ts=time.time(), username=username[:64], address=address[:64], success=success))


def authenticate(db: Session, username: str, password: str) -> User | None:
    user = db.scalar(select(User).where(User.username == username))
    ok = security.verify_password(password, user.password_hash if user else None)
    if not ok or user is None or user.disabled:
        return None
    return user


def create_session(db: Session, settings: Settings, user: User, address: str) -> tuple[str, str]:
    """A fresh session id and CSRF token every login: a pre-set cookie is never adopted (no fixation)."""
    sid = security.new_secret()
    csrf = security.new_secret()
    now = time.time()
    db.add(
        BrowserSession(
            id_hash=security.digest(sid),
            user_id=user.id,
            csrf_token=csrf,
            created_at=now,
            expires_at=now + settings.session_ttl_s,
            address=address[:64],
        )
    )
    return sid, csrf


def session_for(db: Session, sid: str) -> BrowserSession | None:
    sess = db.get(BrowserSession, security.digest(sid))
    if sess is None or sess.expires_at < time.time():
        return None
    return sess


def drop_session(db: Session, sid: str) -> None:
    db.execute(delete(BrowserSession).where(BrowserSession.id_hash == security.digest(sid)))


def drop_user_sessions(db: Session, user_id: int, keep_hash: str | None = None) -> None:
    stmt = delete(BrowserSession).where(BrowserSession.user_id == user_id)
    if keep_hash:
        stmt = stmt.where(BrowserSession.id_hash != keep_hash)
    db.execute(stmt)


def token_user(db: Session, token: str) -> tuple[User, ApiToken] | None:
    tok = db.scalar(select(ApiToken).where(ApiToken.token_hash == security.digest(token)))
    if tok is None:
        return None
    user = db.get(User, tok.user_id)
    if user is None or user.disabled:
        return None
    tok.last_used_at = time.time()
    return user, tok


def validate_new_password(password: str, username: str) -> str | None:
    if len(password) < 12:
        return "password must be at least 12 characters"
    if len(password) > 256:
        return "password must be at most 256 characters"
    if password.lower() == username.lower():
        return "password must differ from the username"
    return None


def write_secret_file(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def bootstrap_admin(db: Session, settings: Settings) -> str | None:
    """On first start (no users): create `admin` with a one-time password that must be changed.

    The password is logged, printed to the console and written to a 0600 file in the data dir.
    Returns the password, or None when users already exist.
    """
    if db.scalar(select(func.count()).select_from(User)):
        return None
    password = security.new_one_time_password()
    db.add(
        User(
            username="admin",
            password_hash=security.hash_password(password),
            role="admin",
            must_change_password=True,
            created_at=time.time(),
        )
    )
    db.flush()
    write_secret_file(settings.initial_password_file, password + "\n")
    msg = (
        f"first start: created user 'admin' with one-time password {password} "
        f"(also in {settings.initial_password_file}); it must be changed at first login"
    )
    log.warning(msg)
    print(msg, file=sys.stderr, flush=True)
    return password


def housekeeping(db: Session, settings: Settings, now: float) -> None:
    """Drop expired sessions, login attempts past any window, and audit entries past retention."""
    from perigee_api.models import AuditEntry

    db.execute(delete(BrowserSession).where(BrowserSession.expires_at < now))
    keep = max(settings.login_window_s, settings.lockout_s) * 2
    db.execute(delete(LoginAttempt).where(LoginAttempt.ts < now - keep))
    db.execute(delete(AuditEntry).where(AuditEntry.ts < now - settings.retain_audit_s))
