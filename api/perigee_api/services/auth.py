"""Users, browser sessions, API tokens and the first admin's one-time password.

Login throttling: services/throttle.py; what a password must be: services/password_policy.py.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from perigee_api.core import security
from perigee_api.core.config import Settings
from perigee_api.models import ApiToken, BrowserSession, LoginAttempt, User
from perigee_api.services import password_policy, throttle

log = logging.getLogger("perigee_api.auth")

ROLES = ("viewer", "operator", "admin")
ROLE_RANK = {r: i for i, r in enumerate(ROLES)}
# An API token acts with the lower of its owner's role and its scope's: never as an admin.
TOKEN_SCOPES = {"read": "viewer", "operator": "operator"}


def role_at_least(role: str, needed: str) -> bool:
    return ROLE_RANK.get(role, -1) >= ROLE_RANK[needed]


def lower_role(a: str, b: str) -> str:
    return a if ROLE_RANK.get(a, -1) <= ROLE_RANK.get(b, -1) else b


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
    """The live token's owner and the token: None when unknown, expired or its owner disabled."""
    tok = db.scalar(select(ApiToken).where(ApiToken.token_hash == security.digest(token)))
    now = time.time()
    if tok is None or tok.expires_at <= now:
        return None
    user = db.get(User, tok.user_id)
    if user is None or user.disabled:
        return None
    tok.last_used_at = now
    return user, tok


def token_role(user: User, tok: ApiToken) -> str:
    return lower_role(user.role, TOKEN_SCOPES.get(tok.scope, "viewer"))


def revoke_user_tokens(db: Session, user_id: int) -> int:
    """A new password ends every API token of the user (a token is as good as the password it came with)."""
    result = db.execute(delete(ApiToken).where(ApiToken.user_id == user_id))
    return int(getattr(result, "rowcount", 0) or 0)


def validate_new_password(password: str, username: str) -> str | None:
    return password_policy.problem(password, username)


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

    The password goes only into a 0600 file in the data dir; the log and the console name the file, never the
    password (logs are often readable by more people than the appliance's admin). Returns the password, or
    None when users already exist.
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
        f"first start: created user 'admin'; its one-time password is in {settings.initial_password_file} "
        "(readable by this service's user only) and must be changed at first login"
    )
    log.warning(msg)
    print(msg, file=sys.stderr, flush=True)
    return password


def housekeeping(db: Session, settings: Settings, now: float) -> None:
    """Drop expired sessions, login attempts past any window, and audit entries past retention."""
    from perigee_api.models import AuditEntry

    db.execute(delete(BrowserSession).where(BrowserSession.expires_at < now))
    db.execute(delete(ApiToken).where(ApiToken.expires_at < now))
    db.execute(delete(LoginAttempt).where(LoginAttempt.ts < throttle.forget_before(settings, now)))
    db.execute(delete(AuditEntry).where(AuditEntry.ts < now - settings.retain_audit_s))
