"""Desired config, versions, diff, dry-run, apply, rollback."""

from __future__ import annotations

import time
from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from perigee_api.api.deps import Ctx, Db, Gateway, Id, Operator, Viewer, audit_info, change_out
from perigee_api.core.errors import ApiError, ErrorResponse
from perigee_api.models import ConfigVersion
from perigee_api.schemas.api import (
    ApplyOut,
    ChangeOut,
    CommentIn,
    ConfigPut,
    DiffEntry,
    DiffOut,
    PolicyIssue,
    PreviewOut,
    RollbackOut,
    RunningOut,
    ValidateOut,
    VersionList,
    VersionOut,
    VersionSummary,
)
from perigee_api.schemas.gateway_config import GatewayConfig
from perigee_api.services import fleet, secret_view, versions
from perigee_api.services.running import needs_setup

# Older than this, the collector's last look at the gateway is taken again before answering.
RUNNING_STALE_S = 15.0

router = APIRouter(
    tags=["config"],
    responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}, 422: {"model": ErrorResponse}},
)


def _summary(v: ConfigVersion, active: int | None) -> VersionSummary:
    return VersionSummary(
        id=v.id,
        author=v.author,
        comment=v.comment,
        created_at=v.created_at,
        apply_status=v.apply_status,
        applied_at=v.applied_at,
        active=v.id == active,
    )


def _shown(db: Session, out: BaseModel) -> JSONResponse:
    """`out` as it leaves the API: its config's secrets as fingerprints (services/secret_view.py)."""
    data = out.model_dump(mode="json", by_alias=True)
    if isinstance(data.get("config"), dict):
        data["config"] = secret_view.shown(db, data["config"])
    return JSONResponse(data)


def _full(db: Session, v: ConfigVersion, active: int | None) -> JSONResponse:
    out = VersionOut(
        **_summary(v, active).model_dump(),
        config=GatewayConfig.model_validate(v.config),
        apply_result=v.apply_result,
    )
    return _shown(db, out)


def _diff(db: Session, a: dict[str, Any], b: dict[str, Any]) -> list[DiffEntry]:
    """The changes from config a to b (the revision left out: it always differs), secrets as fingerprints."""
    ca = {k: v for k, v in secret_view.shown(db, a).items() if k != "revision"}
    cb = {k: v for k, v in secret_view.shown(db, b).items() if k != "revision"}
    return [DiffEntry(**d) for d in versions.diff(ca, cb)]


@router.get("/config", response_model=VersionOut, summary="The desired config (the latest version)")
def get_desired(who: Viewer, db: Db) -> JSONResponse:
    return _full(db, versions.latest(db), versions.active_id(db))


@router.get("/config/active", response_model=VersionOut, responses={404: {"model": ErrorResponse}})
def get_active(who: Viewer, db: Db) -> JSONResponse:
    aid = versions.active_id(db)
    if aid is None:
        raise ApiError(404, "nothing_applied", "no version has been applied yet")
    return _full(db, versions.get(db, aid), aid)


@router.get(
    "/config/running",
    response_model=RunningOut,
    summary="What the gateway runs (imported as a version when the API did not apply it), its drift from the desired",
)
def get_running(who: Viewer, db: Db, ctx: Ctx) -> JSONResponse:
    state = ctx.running
    if time.time() - state.checked_at > RUNNING_STALE_S:
        state = ctx.collector.sync_running()
    desired = versions.latest_or_none(db)
    out = RunningOut(
        reachable=state.reachable,
        revision=state.revision,
        config=GatewayConfig.model_validate(state.config) if state.config is not None else None,
        version_id=state.version_id,
        desired_version_id=desired.id if desired else None,
        in_sync=desired is not None and state.version_id == desired.id,
        changes=_diff(db, state.config or {}, desired.config) if desired else [],
        checked_at=state.checked_at,
        error=state.error,
        needs_setup=needs_setup(state),
    )
    return _shown(db, out)


@router.put("/config", response_model=ChangeOut, summary="Replace the whole desired config (new version)")
def put_config(body: ConfigPut, who: Operator, db: Db, request: Request) -> ChangeOut:
    stored = versions.store(db, body.config.to_json(), who.name, body.comment or "config replaced")
    db.commit()
    audit_info(request, version_id=stored.version.id, changed=stored.changed)
    return change_out(stored)


@router.post(
    "/config/preview",
    response_model=PreviewOut,
    summary="Validate a whole config and diff it against the desired one; stores nothing",
)
def preview_config(
    body: ConfigPut,
    who: Operator,
    db: Db,
    ctx: Ctx,
    against: Literal["desired", "running"] = Query(
        default="desired",
        description="diff against the desired (latest) version, or against the version the gateway runs (what an "
        "edit of the running settings starts from; pending versions are not in it)",
    ),
) -> PreviewOut:
    # The same checks PUT /config makes (the model's, then the policy's), so a preview that passes saves.
    errors, warnings = versions.policy_errors(body.config)
    if errors:
        raise ApiError(
            422, errors[0].code, errors[0].message, "classes", {"issues": versions.issues_json(errors + warnings)}
        )
    base = versions.latest_or_none(db)
    if against == "running" and ctx.running.version_id is not None:
        base = versions.get(db, ctx.running.version_id)
    after = secret_view.taken_back(db, body.config.to_json())
    return PreviewOut(
        base_version_id=base.id if base else None,
        changes=_diff(db, base.config if base else {}, after),
        issues=[PolicyIssue(**i) for i in versions.issues_json(warnings)],
    )


@router.get("/versions", response_model=VersionList)
def list_versions(
    who: Viewer,
    db: Db,
    limit: int = Query(default=50, ge=1, le=500),
    offset: int = Query(default=0, ge=0, le=10_000_000),
) -> VersionList:
    active = versions.active_id(db)
    rows = db.scalars(select(ConfigVersion).order_by(ConfigVersion.id.desc()).limit(limit).offset(offset))
    total = db.scalar(select(func.count()).select_from(ConfigVersion)) or 0
    latest = db.scalar(select(func.max(ConfigVersion.id)))
    return VersionList(
        versions=[_summary(v, active) for v in rows],
        total=total,
        active_version_id=active,
        latest_version_id=latest,
    )


@router.get("/versions/diff", response_model=DiffOut, summary="JSON-path differences from version a to b")
def diff_versions(who: Viewer, db: Db, a: int = Query(ge=1, le=2**62), b: int = Query(ge=1, le=2**62)) -> DiffOut:
    va, vb = versions.get(db, a), versions.get(db, b)
    return DiffOut(a=a, b=b, changes=_diff(db, va.config, vb.config))


@router.get("/versions/{version_id}", response_model=VersionOut, responses={404: {"model": ErrorResponse}})
def get_version(version_id: Id, who: Viewer, db: Db) -> JSONResponse:
    return _full(db, versions.get(db, version_id), versions.active_id(db))


@router.post(
    "/versions/{version_id}/validate",
    response_model=ValidateOut,
    responses={502: {"model": ErrorResponse}},
    summary="Dry run: the gateway validates and renders, changes nothing",
)
def validate_version(version_id: Id, who: Operator, db: Db, gw: Gateway) -> ValidateOut:
    v = versions.get(db, version_id)
    _errors, warnings = versions.policy_errors(GatewayConfig.model_validate(v.config))
    issues = [PolicyIssue(**i) for i in versions.issues_json(warnings)]
    return ValidateOut(**versions.dry_run(gw, v), issues=issues)


@router.post(
    "/versions/{version_id}/apply",
    response_model=ApplyOut,
    responses={502: {"model": ErrorResponse}},
    summary="Apply on every gateway of the fleet (all or none); the per-gateway result is recorded on the version",
)
def apply_version(
    version_id: Id, who: Operator, db: Db, ctx: Ctx, request: Request, body: CommentIn | None = None
) -> ApplyOut:
    v = versions.get(db, version_id)
    res = versions.apply(db, fleet.members(ctx, db), v)
    db.commit()
    ctx.collector.sync_running()
    audit_info(request, version_id=v.id, ok=res["ok"], comment=body.comment if body else "")
    return ApplyOut(**res)


@router.post(
    "/versions/{version_id}/rollback",
    response_model=RollbackOut,
    summary="Make a new version equal to this one and apply it",
)
def rollback_version(version_id: Id, who: Operator, db: Db, ctx: Ctx, request: Request) -> RollbackOut:
    target = versions.get(db, version_id)
    new, res = versions.rollback(db, fleet.members(ctx, db), target, who.name)
    db.commit()
    ctx.collector.sync_running()
    audit_info(request, target_version=target.id, new_version_id=new.id, ok=res["ok"])
    return RollbackOut(new_version_id=new.id, apply=ApplyOut(**res))
