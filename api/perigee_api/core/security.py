"""Password hashing (argon2id), random secrets, and hashing of session ids and API tokens."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

_hasher = PasswordHasher()
# A real hash of a random string: verifying against it for unknown users keeps timing uniform.
_DUMMY_HASH = _hasher.hash(secrets.token_urlsafe(16))

SESSION_COOKIE = "perigee_session"
CSRF_COOKIE = "perigee_csrf"
CSRF_HEADER = "X-CSRF-Token"
TOKEN_PREFIX = "pgt_"  # noqa: S105 - a visible prefix, not a secret
# The one unsafe route without a session: a terminal redeems its enrollment token there (the token is the
# credential, no cookie is read), so it has no CSRF check (perigee_api.middleware), and a malformed request gets
# the route's generic refusal (core/errors.py).
ENROLL_PATH = "/api/v1/peer/enroll"
# The terminal-facing routes of a hub that manages terminals: a terminal's management key (Bearer) is the
# credential, no cookie is read, so no CSRF check either; every refusal is one 401 (core/errors.py).
MANAGED_DESIRED_PATH = "/api/v1/managed/desired"
MANAGED_REPORT_PATH = "/api/v1/managed/report"
MANAGED_PATHS = frozenset({MANAGED_DESIRED_PATH, MANAGED_REPORT_PATH})
# Paths whose unsafe requests carry their own credential and read no cookie: no CSRF check.
CSRF_EXEMPT = frozenset({ENROLL_PATH, MANAGED_REPORT_PATH})


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(password: str, password_hash: str | None) -> bool:
    try:
        return _hasher.verify(password_hash or _DUMMY_HASH, password) and password_hash is not None
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def is_argon2_hash(value: str) -> bool:
    return value.startswith("$argon2") and value.count("$") >= 4


def new_secret(nbytes: int = 32) -> str:
    return secrets.token_urlsafe(nbytes)


def new_one_time_password() -> str:
    return secrets.token_urlsafe(15)


def digest(value: str) -> str:
    """sha256 hex: session ids and API tokens are high-entropy, so a fast hash is enough."""
    return hashlib.sha256(value.encode()).hexdigest()


def new_api_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())
