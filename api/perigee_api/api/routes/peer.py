"""The peer path's trust: terminals enrolled at the hub (enroll, rotate, revoke; each a new config version applied
to the fleet), enrollment tokens a terminal enrolls itself with, this box's own identity (shown to be copied to
the other end, rotated), and a terminal's hub."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from sqlalchemy.orm import Session

from perigee_api.api.deps import Ctx, Db, Id, Operator, SettingsDep, Viewer, audit_info
from perigee_api.core.client_address import client_address
from perigee_api.core.context import AppContext
from perigee_api.core.errors import ENROLLMENT_REFUSED, ApiError, ErrorResponse
from perigee_api.models import ConfigVersion, EnrollmentToken
from perigee_api.schemas.api import ApplyOut
from perigee_api.schemas.trust import (
    FINGERPRINT_PATTERN,
    EnrollIn,
    EnrollmentTokenCreated,
    EnrollmentTokenIn,
    EnrollmentTokenList,
    EnrollmentTokenOut,
    EnrollOut,
    FingerprintIn,
    HubIn,
    IdentityList,
    TerminalChangeOut,
    TerminalIn,
    TerminalList,
)
from perigee_api.services import enrollment, managed_hub, terminals, throttle

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
    managed_hub.revoke(db, name)  # its management key ends with it
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


# --- enrollment tokens -----------------------------------------------------------------------------------------


def refused() -> ApiError:
    """The one answer to every token that is not live: it does not say why (the audit log does)."""
    return ApiError(401, "enrollment_refused", ENROLLMENT_REFUSED)


def _token_out(t: EnrollmentToken) -> dict[str, object]:
    return {
        "id": t.id,
        "name": t.name,
        "prefixes": list(t.prefixes),
        "comment": t.comment,
        "created_at": t.created_at,
        "created_by": t.created_by,
        "expires_at": t.expires_at,
        "state": enrollment.state(t, time.time()),
        "used_at": t.used_at,
        "used_fingerprint": t.used_fingerprint,
        "used_version_id": t.used_version_id,
        "revoked_at": t.revoked_at,
        "revoked_by": t.revoked_by,
    }


@router.post(
    "/enrollment-tokens",
    response_model=EnrollmentTokenCreated,
    status_code=201,
    responses=CHANGE,
    summary="Create a one-time token a terminal enrolls itself with (the token is shown once)",
)
def create_enrollment_token(
    body: EnrollmentTokenIn, who: Operator, db: Db, ctx: Ctx, request: Request
) -> EnrollmentTokenCreated:
    made = enrollment.create(ctx, db, who.name, body.name, list(body.prefixes), body.expires_in_s, body.comment)
    db.commit()
    audit_info(request, token_id=made.row.id, terminal=body.name, prefixes=list(body.prefixes))
    return EnrollmentTokenCreated.model_validate({**_token_out(made.row), "token": made.token})


@router.get(
    "/enrollment-tokens",
    response_model=EnrollmentTokenList,
    summary="Enrollment tokens and their state (never a token or its hash)",
)
def list_enrollment_tokens(who: Viewer, db: Db) -> EnrollmentTokenList:
    return EnrollmentTokenList(tokens=[EnrollmentTokenOut.model_validate(_token_out(t)) for t in enrollment.listed(db)])


@router.delete(
    "/enrollment-tokens/{token_id}",
    response_model=EnrollmentTokenOut,
    responses=CHANGE,
    summary="Revoke an enrollment token (a used one is not revoked: revoke its terminal)",
)
def revoke_enrollment_token(token_id: Id, who: Operator, db: Db, request: Request) -> EnrollmentTokenOut:
    row = enrollment.revoke(db, token_id, who.name)
    db.commit()
    audit_info(request, token_id=row.id, terminal=row.name)
    return EnrollmentTokenOut.model_validate(_token_out(row))


@router.post(
    "/enroll",
    response_model=EnrollOut,
    responses={
        400: {"model": ErrorResponse},
        409: {"model": ErrorResponse},
        429: {"model": ErrorResponse},
        502: {"model": ErrorResponse},
        503: {"model": ErrorResponse},
    },
    summary="A terminal enrolls itself with an enrollment token (no session: the token is the credential)",
)
def redeem_enrollment_token(body: EnrollIn, db: Db, ctx: Ctx, settings: SettingsDep, request: Request) -> EnrollOut:
    address = client_address(request.scope)
    verdict = throttle.check_enrollment(db, settings, address)
    # A live token is honoured even from a throttled address (an outsider behind the terminal's NAT cannot keep
    # it out); guessing one is hopeless (256 bits), so the throttle only slows an address that keeps failing.
    if not verdict.allowed and not enrollment.is_live(db, body.token):
        audit_info(request, refused="throttled")
        raise ApiError(
            429,
            verdict.reason,
            f"too many refused enrollment tokens from your address: retry in {verdict.retry_after_s} s",
            headers={"Retry-After": str(verdict.retry_after_s)},
        )
    try:
        done = enrollment.redeem(ctx, db, body.token, body.fingerprint)
    except enrollment.Refused as exc:
        throttle.note(db, throttle.ENROLLMENT, address, False)
        db.commit()
        audit_info(request, refused=exc.reason)
        raise refused() from None
    throttle.note(db, throttle.ENROLLMENT, address, True)
    db.commit()
    ctx.collector.sync_running()
    request.scope.setdefault("perigee", {})["actor"] = f"enrollment token {done.row.id}"
    audit_info(
        request,
        token_id=done.row.id,
        terminal=done.row.name,
        fingerprint=body.fingerprint,
        version_id=done.version_id,
        ok=done.apply.get("ok"),
    )
    return EnrollOut.model_validate(
        {
            "name": done.row.name,
            "prefixes": list(done.row.prefixes),
            "version_id": done.version_id,
            "peer": done.peer,
            "management_key": done.management_key,
        }
    )
