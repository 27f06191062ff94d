"""The Squid cache's counters and purges (passed through to the gateway, which manages Squid)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from perigee_api.api.deps import Gateway, Operator, Viewer, audit_info
from perigee_api.core.errors import ApiError, ErrorResponse
from perigee_api.schemas.api import CacheStats, PurgeIn, PurgeResponse

router = APIRouter(tags=["system"], responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}})


@router.get("/cache/stats", response_model=CacheStats, summary="Cache counters (gateway passthrough)")
def cache_stats(who: Viewer, gw: Gateway) -> dict[str, Any]:
    return gw.json.cache_stats()


@router.post("/cache/purge", response_model=PurgeResponse, summary="Purge one URL or everything (gateway passthrough)")
def cache_purge(body: PurgeIn, who: Operator, gw: Gateway, request: Request) -> dict[str, Any]:
    if body.all == (body.url is not None):
        raise ApiError(422, "purge_target", "give exactly one of url or all=true", "url")
    audit_info(request, url=body.url, all=body.all)
    return gw.json.cache_purge(url=body.url, purge_all=body.all)
