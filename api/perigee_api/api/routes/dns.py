"""The caching resolver's counters and flushes (passed through to the gateway, which manages it)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from perigee_api.api.deps import Gateway, Operator, Viewer, audit_info
from perigee_api.core.errors import ApiError, ErrorResponse
from perigee_api.schemas.api import DnsFlushIn, DnsFlushOut, DnsReport

router = APIRouter(tags=["system"], responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}})


@router.get(
    "/dns/stats",
    response_model=DnsReport,
    summary="Resolver counters: queries, hit ratio, stale answers, time saved (gateway passthrough)",
)
def dns_stats(who: Viewer, gw: Gateway) -> dict[str, Any]:
    return gw.json.dns_stats()


@router.post(
    "/dns/flush", response_model=DnsFlushOut, summary="Flush one name or the whole resolver cache (gateway passthrough)"
)
def dns_flush(body: DnsFlushIn, who: Operator, gw: Gateway, request: Request) -> dict[str, Any]:
    if body.all == (body.name is not None):
        raise ApiError(422, "flush_target", "give exactly one of name or all=true", "name")
    audit_info(request, name=body.name, all=body.all)
    return gw.json.dns_flush(name=body.name, flush_all=body.all)
