"""The API's health probe: the database, the collector, the gateway's reachability and its own health."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter
from sqlalchemy import select

from perigee_api import __version__
from perigee_api.api.deps import Ctx, Db
from perigee_api.core.errors import ErrorResponse
from perigee_api.schemas.api import HealthOut
from perigee_control.client import GatewayError
from perigee_control.reports import Health

router = APIRouter(tags=["system"], responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}})


@router.get("/health", response_model=HealthOut, summary="API health, gateway reachability and its health")
def health(ctx: Ctx, db: Db) -> HealthOut:
    problems: list[str] = []
    api: dict[str, Any] = {"status": "ok", "version": __version__, "uptime_s": time.time() - ctx.started_at}
    try:
        db.execute(select(1))
    except Exception as exc:  # any database failure is a health problem, reported not raised
        problems.append(f"database: {exc}")
        api["status"] = "degraded"
    api["collector"] = {"ticks": ctx.collector.ticks, "last_error": ctx.collector.last_error}
    gw_health: Health | None = None
    reachable = False
    try:
        gw_health = ctx.gateway.health()
        reachable = True
        if gw_health.status != "ok":
            problems += [f"gateway: {p}" for p in gw_health.problems] or ["gateway: degraded"]
    except GatewayError as exc:
        problems.append(f"gateway unreachable: {exc.message}")
    status = "ok" if not problems else "degraded"
    return HealthOut(status=status, api=api, gateway_reachable=reachable, gateway=gw_health, problems=problems)
