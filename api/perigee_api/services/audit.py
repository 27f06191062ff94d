"""Audit log: every write and every login attempt (who, when, from where, what, result)."""

from __future__ import annotations

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
