"""What this appliance is: the versions of its parts and the gateway's network interfaces."""

from __future__ import annotations

import platform
from typing import Any

from fastapi import APIRouter
from sqlalchemy import text

from perigee_api import __version__
from perigee_api.api.deps import Db, Gateway, Viewer
from perigee_api.core.errors import ErrorResponse
from perigee_api.schemas.api import InterfaceList, VersionsOut
from perigee_control.client import GatewayError

router = APIRouter(tags=["system"], responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}})


@router.get("/system/versions", response_model=VersionsOut)
def system_versions(who: Viewer, db: Db, gw: Gateway) -> VersionsOut:
    rev = db.scalar(text("SELECT version_num FROM alembic_version"))
    try:
        gwv = gw.health().version
    except GatewayError:
        gwv = None
    return VersionsOut(api=__version__, python=platform.python_version(), schema_revision=rev, gateway=gwv)


@router.get(
    "/system/interfaces",
    response_model=InterfaceList,
    responses={502: {"model": ErrorResponse}},
    summary="The gateway's network interfaces: addresses, state, MTU, what the running config uses them for",
)
def system_interfaces(who: Viewer, gw: Gateway) -> dict[str, Any]:
    return gw.json.interfaces()
