"""Terminals managed from the hub. At the hub, the terminal-facing routes: a terminal's long poll for its next
version and its reports (no session: its management key, a Bearer secret, is the credential; every refusal is one
401, throttled per address). At a terminal: joining a hub, and its status. The hub's operators see and make a
terminal's versions in routes/managed_versions.py."""

from __future__ import annotations

import time

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from perigee_api.api.deps import Admin, Ctx, Db, Viewer, audit_info, read_only
from perigee_api.core.client_address import client_address
from perigee_api.core.context import AppContext
from perigee_api.core.errors import ApiError, ErrorResponse, error_json
from perigee_api.models import ManagedTerminal
from perigee_api.schemas.managed import JoinIn, ManagedDesired, ManagedReport, ManagedStatus
from perigee_api.services import managed_hub, managed_lifecycle, managed_terminal, throttle

router = APIRouter(prefix="/managed", tags=["managed"])

KEY_ERRORS: dict[int | str, dict[str, object]] = {
    401: {"model": ErrorResponse},
    422: {"model": ErrorResponse},
    429: {"model": ErrorResponse},
}
MAX_WAIT_S = 25.0


def refused() -> ApiError:
    return ApiError(401, "management_key_refused", managed_hub.KEY_REFUSED, headers={"WWW-Authenticate": "Bearer"})


def key_holder(ctx: AppContext, request: Request) -> int:
    """The managed terminal the request's key belongs to (its id), or the one refusal. A valid key is honoured
    even from a throttled address (an outsider cannot keep a terminal out); a wrong one counts against its address."""
    address = client_address(request.scope)
    key = managed_hub.bearer(request.headers.get("authorization", ""))
    with ctx.db.session() as db:
        row = managed_hub.authenticate(db, key)
        if row is not None:
            request.scope.setdefault("perigee", {})["actor"] = f"terminal {row.name}"
            return row.id
        verdict = throttle.check_managed(db, ctx.settings, address)
        if not verdict.allowed:
            raise ApiError(
                429,
                verdict.reason,
                f"too many refused management keys from your address: retry in {verdict.retry_after_s} s",
                headers={"Retry-After": str(verdict.retry_after_s)},
            )
        throttle.note(db, throttle.MANAGED, address, False)
        db.commit()
    raise refused()


async def refusal(request: Request) -> JSONResponse | None:
    """For core/errors.py: the refusal of a malformed request whose key is not valid (None when it is)."""
    try:
        await run_in_threadpool(key_holder, request.app.state.ctx, request)
    except ApiError as exc:
        return error_json(exc.status, exc.code, exc.message, exc.field, exc.details, exc.headers)
    return None


def _terminal(request: Request) -> int:
    return key_holder(request.app.state.ctx, request)


KeyHolder = Depends(_terminal)


def _next(ctx: AppContext, terminal_id: int, after: int) -> dict[str, object] | None:
    """The terminal's next version, marked sent (from then on it cannot be cancelled); None when there is none."""
    with ctx.db.session() as db:
        row = db.get(ManagedTerminal, terminal_id)
        v = managed_lifecycle.deliver(db, row, after) if row is not None else None
        if v is None:
            return None
        return {"version_id": v.id, "sections": v.sections, "comment": v.comment}


@router.get(
    "/desired",
    response_model=ManagedDesired,
    responses={**KEY_ERRORS, 204: {"description": "nothing newer than `after` came within `wait`"}},
    summary="A managed terminal's next version (long poll; Bearer: its management key)",
)
async def desired(
    ctx: Ctx,
    terminal_id: int = KeyHolder,
    after: int = Query(default=0, ge=0, le=2**62, description="the newest version the terminal has seen"),
    wait: float = Query(default=0, ge=0, le=MAX_WAIT_S, description="seconds to wait for one"),
) -> Response:
    deadline = time.monotonic() + wait
    if wait <= 0:
        return _answer(await run_in_threadpool(_next, ctx, terminal_id, after))
    # Listening before the first look: a version made between a look and the wait still wakes this poll. Only a
    # version for this terminal wakes it (one look each), never one for another terminal.
    with ctx.managed_versions.listen(terminal_id) as waiter:
        while True:
            found = await run_in_threadpool(_next, ctx, terminal_id, after)
            left = deadline - time.monotonic()
            if found is not None or left <= 0 or waiter.released:
                return _answer(found)
            if not await waiter.wait(left):
                return _answer(None)  # not woken: nothing was made for it, no need to look again


def _answer(found: dict[str, object] | None) -> Response:
    if found is None:
        return Response(status_code=204)
    return JSONResponse(ManagedDesired.model_validate(found).model_dump(mode="json"))


@router.post(
    "/report",
    status_code=204,
    responses=KEY_ERRORS,
    summary="A managed terminal reports a version's outcome and how it runs (Bearer: its management key)",
)
def report(body: ManagedReport, request: Request, db: Db, terminal_id: int = KeyHolder) -> Response:
    row = db.get(ManagedTerminal, terminal_id)
    if row is None:
        raise refused()
    changed = managed_hub.report(db, row, body)
    db.commit()
    if changed is None:
        read_only(request)  # a routine report changes no version: not an audit entry every 30 s
    else:
        audit_info(request, terminal=row.name, managed_version_id=changed.id, state=changed.state, error=changed.error)
    return Response(status_code=204)


# --- at a terminal ---------------------------------------------------------------------------------------------


@router.post(
    "/join",
    response_model=ManagedStatus,
    responses={409: {"model": ErrorResponse}, 422: {"model": ErrorResponse}, 502: {"model": ErrorResponse}},
    summary="Join a hub with an enrollment token, its HTTPS certificate pinned: managed from it from then on",
)
def join(body: JoinIn, who: Admin, db: Db, ctx: Ctx, request: Request) -> ManagedStatus:
    row = managed_terminal.join(ctx, db, body)
    audit_info(request, hub_url=body.hub_url, hub_pin=body.hub_pin, name=row.name, error=row.last_error)
    if row.last_error:
        raise ApiError(502, "join_not_applied", row.last_error)
    return ManagedStatus.model_validate(managed_terminal.status(db))


@router.get("/status", response_model=ManagedStatus, summary="Whether this terminal is managed from a hub, and how")
def managed_status(who: Viewer, db: Db, ctx: Ctx) -> ManagedStatus:
    return ManagedStatus.model_validate(managed_terminal.status(db, ctx.managed_poller.join_error))
