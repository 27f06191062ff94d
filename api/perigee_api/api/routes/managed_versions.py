"""At the hub: one terminal in detail (with what it last reported) and the config versions made for it, each
validated before it is stored and sent to the terminal when it asks (routes/managed.py); an admin may cancel one
that was not sent yet."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from sqlalchemy.orm import Session

from perigee_api.api.deps import Admin, Ctx, Db, Operator, Viewer, audit_info
from perigee_api.core.errors import ApiError, ErrorResponse
from perigee_api.models import ManagedTerminal
from perigee_api.schemas.managed import ManagedVersionIn, ManagedVersionList, ManagedVersionOut, TerminalDetail
from perigee_api.services import managed_hub, managed_lifecycle

router = APIRouter(
    prefix="/peer",
    tags=["peer"],
    responses={
        401: {"model": ErrorResponse},
        403: {"model": ErrorResponse},
        404: {"model": ErrorResponse},
        422: {"model": ErrorResponse},
    },
)
TerminalName = Annotated[str, Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")]


def _managed(db: Session, name: str) -> ManagedTerminal:
    row = managed_hub.managed(db, name)
    if row is None:
        raise ApiError(
            404,
            "terminal_not_managed",
            f"no terminal named '{name}' is managed from this hub (a terminal enrolled with a token is)",
            "name",
        )
    return row


@router.get("/terminals/{name}", response_model=TerminalDetail, summary="One enrolled terminal, with its last report")
def get_terminal(name: TerminalName, who: Viewer, db: Db, ctx: Ctx) -> TerminalDetail:
    out = TerminalDetail.model_validate(managed_hub.detail(ctx, db, name))
    db.commit()
    return out


@router.get(
    "/terminals/{name}/versions",
    response_model=ManagedVersionList,
    summary="The config versions made for a managed terminal, newest first, with what it reported of each",
)
def list_versions(name: TerminalName, who: Viewer, db: Db) -> ManagedVersionList:
    row = _managed(db, name)
    return ManagedVersionList(
        versions=[
            ManagedVersionOut.model_validate(managed_hub.version_out(v, name)) for v in managed_hub.listed(db, row)
        ]
    )


@router.post(
    "/terminals/{name}/versions",
    response_model=ManagedVersionOut,
    status_code=201,
    summary="A new version for a managed terminal: managed sections, validated before stored, sent when it asks",
)
def create_version(
    name: TerminalName, body: ManagedVersionIn, who: Operator, db: Db, ctx: Ctx, request: Request
) -> ManagedVersionOut:
    row = _managed(db, name)
    v = managed_hub.create_version(db, row, who.name, body.sections, body.comment)
    db.commit()
    managed_hub.wake(ctx, row)
    audit_info(request, terminal=name, managed_version_id=v.id, sections=sorted(v.sections))
    return ManagedVersionOut.model_validate(managed_hub.version_out(v, name))


@router.post(
    "/terminals/{name}/versions/{version_id}/cancel",
    response_model=ManagedVersionOut,
    responses={409: {"model": ErrorResponse}},
    summary="Cancel a version the terminal has not been sent yet: it never gets it (admin); kept in the history",
)
def cancel_version(
    name: TerminalName,
    version_id: Annotated[int, Path(ge=1, le=2**62)],
    who: Admin,
    db: Db,
    request: Request,
) -> ManagedVersionOut:
    row = _managed(db, name)
    audit_info(request, terminal=name, managed_version_id=version_id)
    v = managed_lifecycle.cancel(db, row, version_id, who.name)
    audit_info(request, state=v.state)
    return ManagedVersionOut.model_validate(managed_hub.version_out(v, name))
