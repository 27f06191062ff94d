"""The audit log: who changed what, newest first, filtered."""

from __future__ import annotations

from fastapi import APIRouter, Query
from sqlalchemy import func, select

from perigee_api.api.deps import Admin, Db
from perigee_api.core.errors import ErrorResponse
from perigee_api.models import AuditEntry
from perigee_api.schemas.api import AuditOut, AuditPage
from perigee_api.services import audit

router = APIRouter(tags=["system"], responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}})


def _entry(row: AuditEntry) -> AuditOut:
    out = AuditOut.model_validate(row, from_attributes=True)
    return out.model_copy(update={"description": audit.describe(row.action)})


@router.get("/audit", response_model=AuditPage, summary="Audit log, newest first")
def audit_log(
    who: Admin,
    db: Db,
    actor: str | None = Query(default=None, max_length=64),
    action: str | None = Query(default=None, max_length=128, description="substring"),
    since: float | None = Query(default=None, ge=0, le=1e11),
    limit: int = Query(default=100, ge=1, le=1000),
    offset: int = Query(default=0, ge=0, le=10_000_000),
) -> AuditPage:
    conds = []
    if actor:
        conds.append(AuditEntry.actor == actor)
    if action:
        conds.append(AuditEntry.action.contains(action))
    if since is not None:
        conds.append(AuditEntry.ts >= since)
    total = db.scalar(select(func.count()).select_from(AuditEntry).where(*conds)) or 0
    rows = db.scalars(select(AuditEntry).where(*conds).order_by(AuditEntry.id.desc()).limit(limit).offset(offset))
    return AuditPage(
        entries=[_entry(r) for r in rows],
        total=total,
        limit=limit,
        offset=offset,
    )
