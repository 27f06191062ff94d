"""The peer path's trust: terminals enrolled at the hub (enroll, rotate, revoke; each a new config version applied
to the fleet), this box's own identity (shown to be copied to the other end, rotated), and a terminal's hub."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from sqlalchemy.orm import Session

from perigee_api.api.deps import Ctx, Db, Operator, Viewer, audit_info
from perigee_api.core.context import AppContext
from perigee_api.core.errors import ErrorResponse
from perigee_api.models import ConfigVersion
from perigee_api.schemas.api import ApplyOut
from perigee_api.schemas.trust import (
    FINGERPRINT_PATTERN,
    FingerprintIn,
    HubIn,
    IdentityList,
    TerminalChangeOut,
    TerminalIn,
    TerminalList,
)
from perigee_api.services import terminals

router = APIRouter(
    prefix="/peer",
    tags=["peer"],
    responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}, 422: {"model": ErrorResponse}},
)
CHANGE: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse},
    409: {"model": ErrorResponse},
    502: {"model": ErrorResponse},
}
TerminalName = Annotated[str, Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")]
FingerprintPath = Annotated[str, Path(pattern=FINGERPRINT_PATTERN)]


def _changed(request: Request, v: ConfigVersion, res: dict[str, object], **detail: object) -> TerminalChangeOut:
    audit_info(request, version_id=v.id, ok=res["ok"], **detail)
    return TerminalChangeOut(version_id=v.id, apply=ApplyOut.model_validate(res))


@router.get("/terminals", response_model=TerminalList, summary="Enrolled terminals and their connections at the hub")
def list_terminals(who: Viewer, db: Db, ctx: Ctx) -> TerminalList:
    out = TerminalList.model_validate(terminals.status(ctx, db))
    db.commit()
    return out


@router.post(
    "/terminals",
    response_model=TerminalChangeOut,
    status_code=201,
    responses=CHANGE,
    summary="Enroll a terminal by its identity's fingerprint and its site's prefixes (new version, applied)",
)
def enroll_terminal(body: TerminalIn, who: Operator, db: Db, ctx: Ctx, request: Request) -> TerminalChangeOut:
    v, res = terminals.enroll(ctx, db, who.name, body.name, list(body.prefixes), body.fingerprint, body.comment)
    db.commit()
    ctx.collector.sync_running()
    return _changed(request, v, res, terminal=body.name, fingerprint=body.fingerprint, prefixes=list(body.prefixes))


@router.delete(
    "/terminals/{name}",
    response_model=TerminalChangeOut,
    responses=CHANGE,
    summary="Revoke a terminal: its connections are closed and its identity refused (new version, applied)",
)
def revoke_terminal(name: TerminalName, who: Operator, db: Db, ctx: Ctx, request: Request) -> TerminalChangeOut:
    v, res = terminals.revoke(ctx, db, who.name, name, "")
    db.commit()
    ctx.collector.sync_running()
    return _changed(request, v, res, terminal=name)


@router.post(
    "/terminals/{name}/fingerprints",
    response_model=TerminalChangeOut,
    responses=CHANGE,
    summary="Rotation, first step: accept the terminal's next identity beside its current one",
)
def add_fingerprint(
    name: TerminalName, body: FingerprintIn, who: Operator, db: Db, ctx: Ctx, request: Request
) -> TerminalChangeOut:
    v, res = terminals.add_fingerprint(ctx, db, who.name, name, body.fingerprint, body.comment)
    db.commit()
    ctx.collector.sync_running()
    return _changed(request, v, res, terminal=name, fingerprint=body.fingerprint)


@router.delete(
    "/terminals/{name}/fingerprints/{fingerprint}",
    response_model=TerminalChangeOut,
    responses=CHANGE,
    summary="Rotation, last step: drop an identity (its idle connections close; live flows stay)",
)
def drop_fingerprint(
    name: TerminalName, fingerprint: FingerprintPath, who: Operator, db: Db, ctx: Ctx, request: Request
) -> TerminalChangeOut:
    v, res = terminals.drop_fingerprint(ctx, db, who.name, name, fingerprint, "")
    db.commit()
    ctx.collector.sync_running()
    return _changed(request, v, res, terminal=name, fingerprint=fingerprint)


@router.get(
    "/identity",
    response_model=IdentityList,
    summary="Each gateway's own identity for the peer path (public: the fingerprint is what the other end enrolls)",
)
def get_identity(who: Viewer, db: Db, ctx: Ctx) -> IdentityList:
    return _identities(db, ctx)


def _identities(db: Session, ctx: AppContext) -> IdentityList:
    out = IdentityList.model_validate(terminals.identities(ctx, db))
    db.commit()  # expired revocations pruned while the fleet was asked
    return out


@router.post(
    "/identity/rotate",
    response_model=IdentityList,
    responses={502: {"model": ErrorResponse}},
    summary="Stage a next identity on this gateway (the current one stays in use until commit)",
)
def rotate_identity(who: Operator, db: Db, ctx: Ctx, request: Request) -> IdentityList:
    staged = ctx.gateway.json.identity_rotate()
    audit_info(request, next_fingerprint=staged.get("next_fingerprint"))
    return _identities(db, ctx)


@router.post(
    "/identity/commit",
    response_model=IdentityList,
    responses={502: {"model": ErrorResponse}},
    summary="New connections use the staged identity (live flows keep theirs): enroll it at the hub first",
)
def commit_identity(who: Operator, db: Db, ctx: Ctx, request: Request) -> IdentityList:
    committed = ctx.gateway.json.identity_commit()
    audit_info(request, fingerprint=committed.get("fingerprint"))
    return _identities(db, ctx)


@router.put(
    "/hub",
    response_model=TerminalChangeOut,
    responses=CHANGE,
    summary="A terminal's hub: its address and the identities of its gateways (new version, applied)",
)
def set_hub(body: HubIn, who: Operator, db: Db, ctx: Ctx, request: Request) -> TerminalChangeOut:
    v, res = terminals.set_hub(
        ctx, db, who.name, body.hub, list(body.hub_fingerprints), body.port, body.enabled, body.comment
    )
    db.commit()
    ctx.collector.sync_running()
    return _changed(request, v, res, hub=body.hub, hub_fingerprints=list(body.hub_fingerprints))
