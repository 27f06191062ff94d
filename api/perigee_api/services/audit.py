"""Audit log: every write and every login attempt (who, when, from where, what, result)."""

from __future__ import annotations

import re
import time
from typing import Any

from sqlalchemy.orm import Session

from perigee_api.models import AuditEntry


def record(
    db: Session,
    *,
    actor: str,
    address: str,
    action: str,
    target: str = "",
    result: str = "ok",
    detail: dict[str, Any] | None = None,
) -> None:
    db.add(
        AuditEntry(
            ts=time.time(),
            actor=actor[:64],
            address=address[:64],
            action=action[:128],
            target=target[:512],
            result=result[:64],
            detail=detail,
        )
    )


# What each audited write is, in an operator's words ("{1}" is the path's first variable part).
_ACTIONS: tuple[tuple[str, str, str], ...] = (
    ("POST", r"/auth/login", "signed in"),
    ("POST", r"/auth/logout", "signed out"),
    ("POST", r"/auth/change-password", "changed their password"),
    ("POST", r"/bod/profiles", "saved a new BoD profile"),
    ("PUT", r"/bod/profiles/([^/]+)", "changed BoD profile {1}"),
    ("DELETE", r"/bod/profiles/([^/]+)", "deleted BoD profile {1}"),
    ("POST", r"/bod/profiles/([^/]+)/apply-to-config", "wrote BoD profile {1} into the config"),
    ("POST", r"/cache/purge", "purged the cache"),
    ("PUT", r"/config", "replaced the config (system settings)"),
    ("POST", r"/dns/flush", "flushed the resolver's cache"),
    ("POST", r"/fleet/gateways", "registered a gateway"),
    ("DELETE", r"/fleet/gateways/([^/]+)", "removed gateway {1}"),
    ("POST", r"/peer/enroll", "enrolled a terminal with an enrollment token"),
    ("POST", r"/peer/enrollment-tokens", "created an enrollment token"),
    ("DELETE", r"/peer/enrollment-tokens/([^/]+)", "revoked enrollment token {1}"),
    ("POST", r"/policy/bypass", "added a bypass rule"),
    ("POST", r"/policy/bypass/restore-builtins", "restored the built-in bypass rules"),
    ("DELETE", r"/policy/bypass/([^/]+)", "deleted bypass rule {1}"),
    ("POST", r"/policy/classes", "added a traffic class"),
    ("PATCH", r"/policy/classes/([^/]+)", "edited traffic class {1}"),
    ("DELETE", r"/policy/classes/([^/]+)", "deleted traffic class {1}"),
    ("POST", r"/system/restore", "restored a backup"),
    ("PUT", r"/system/tls", "uploaded a TLS certificate"),
    ("POST", r"/tokens", "created an API token"),
    ("DELETE", r"/tokens/([^/]+)", "revoked API token {1}"),
    ("POST", r"/users", "created a user"),
    ("PATCH", r"/users/([^/]+)", "changed user {1}"),
    ("DELETE", r"/users/([^/]+)", "deleted user {1}"),
    ("POST", r"/versions/([^/]+)/apply", "applied config version {1}"),
    ("POST", r"/versions/([^/]+)/rollback", "rolled back to config version {1}"),
    ("POST", r"/versions/([^/]+)/validate", "dry-ran config version {1}"),
)


def describe(action: str) -> str:
    """An audited action ("PATCH /api/v1/policy/classes/web") in words ("edited traffic class web")."""
    method, _, path = action.partition(" ")
    rest = path.removeprefix("/api/v1")
    for m, pattern, words in _ACTIONS:
        hit = re.fullmatch(pattern, rest)
        if m == method and hit:
            return words.replace("{1}", hit.group(1)) if hit.groups() else words
    return action
