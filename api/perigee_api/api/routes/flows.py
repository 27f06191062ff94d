"""Live flows (snapshot and SSE stream), flow history and time series."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response, StreamingResponse
from sqlalchemy import func, select
from starlette.types import Receive, Scope, Send

from perigee_api.api.deps import Ctx, Db, Viewer
from perigee_api.core.context import LiveFlows
from perigee_api.core.errors import ApiError, ErrorResponse
from perigee_api.models import FlowRecord
from perigee_api.schemas.api import (
    FLOWS_EVENT,
    FlowPage,
    FlowRecordOut,
    FlowsEvent,
    LiveFlowsOut,
    Series,
    SeriesOut,
    SeriesPoint,
)
from perigee_api.services import stats
from perigee_api.services.flow_query import FlowFilter
from perigee_control.reports import Action, FlowPath

router = APIRouter(tags=["flows"], responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}})


@router.get("/flows", response_model=LiveFlowsOut, summary="Live flows (the collector's latest snapshot)")
def live_flows(
    who: Viewer,
    ctx: Ctx,
    limit: int = Query(default=100000, ge=1, le=100000),
    action: Action | None = None,
) -> Response:
    # Flows are passed through as the gateway sent them (already checked by the schema on the way in);
    # the unfiltered answer is encoded once per snapshot, so polling 10,000 flows stays cheap.
    # A stale snapshot (collector stopped or behind) is read anew; an unreachable gateway shows in `error`.
    ctx.collector.refresh_live_if_stale()
    flows, now, seq = ctx.live.snapshot()
    unfiltered = action is None and limit >= len(flows)
    cached = ctx.live.encoded
    if unfiltered and cached and cached[0] == seq and seq > 0:
        return Response(cached[1], media_type="application/json")
    items = _encoded_flows(ctx.live, flows, seq)
    if action:
        items = [item for flow, item in zip(flows, items, strict=True) if flow.get("action") == action]
    tail = json.dumps(
        {"now": now, "count": len(items), "fetched_at": ctx.live.fetched_at, "error": ctx.live.error},
        separators=(",", ":"),
    ).encode()
    body = b'{"flows":[' + b",".join(items[:limit]) + b"]," + tail[1:]
    if unfiltered:
        ctx.live.encoded = (seq, body)
    return Response(body, media_type="application/json")


def _encoded_flows(live: LiveFlows, flows: list[dict[str, Any]], seq: int) -> list[bytes]:
    """Each flow of snapshot `seq` as compact JSON, encoded once per snapshot."""
    cached = live.encoded_flows
    if cached and cached[0] == seq and seq > 0:
        return cached[1]
    items = [json.dumps(f, separators=(",", ":")).encode() for f in flows]
    live.encoded_flows = (seq, items)
    return items


class _SlotResponse(StreamingResponse):
    """Gives the user's stream slot back however the response ends (done, client gone, error); the generator's
    own `finally` would not run if the client left before the first chunk was asked for."""

    def __init__(self, content: AsyncIterator[bytes], release: Callable[[], None], **kw: Any) -> None:
        super().__init__(content, **kw)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


@router.get(
    "/flows/stream",
    summary="Server-Sent Events: one `flows` event per collector tick, up to max_events; then the stream ends "
    "and the client reconnects",
    response_class=StreamingResponse,
    responses={
        200: {"model": FlowsEvent, "content": {"text/event-stream": {}}, "description": "`event: flows` events"},
        429: {"model": ErrorResponse},
    },
)
async def flows_stream(
    request: Request,
    who: Viewer,
    ctx: Ctx,
    max_events: int | None = Query(
        default=None, ge=1, le=86_400, description="stop after N events (default and upper bound: the server's, 3600)"
    ),
    interval_s: float = Query(default=1.0, ge=0.1, le=60.0, description="heartbeat when nothing changes"),
) -> StreamingResponse:
    limit = min(max_events or ctx.settings.stream_max_events, ctx.settings.stream_max_events)
    user_id = who.user.id
    if not ctx.streams.take(user_id, ctx.settings.streams_per_user):
        raise ApiError(
            429,
            "too_many_streams",
            f"at most {ctx.settings.streams_per_user} live streams per user are open at once: close one first",
            headers={"Retry-After": "5"},
        )

    async def events() -> AsyncIterator[bytes]:
        ev = ctx.live.listen()
        sent = 0
        last_seq = -1
        try:
            yield b"retry: 2000\n\n"
            while sent < limit:
                flows, now, seq = ctx.live.snapshot()
                if seq != last_seq or sent == 0:
                    # FlowsEvent's fields; the flows pass through as the gateway sent them (checked on the way in).
                    data = json.dumps({"flows": flows, "now": now, "seq": seq, "error": ctx.live.error})
                    yield f"event: {FLOWS_EVENT}\nid: {seq}\ndata: {data}\n\n".encode()
                    last_seq = seq
                    sent += 1
                    continue
                if await request.is_disconnected():
                    break
                try:
                    await asyncio.wait_for(ev.wait(), timeout=interval_s)
                except TimeoutError:
                    yield b": keepalive\n\n"
                ev.clear()
        finally:
            ctx.live.unlisten(ev)

    return _SlotResponse(
        events(),
        lambda: ctx.streams.give_back(user_id),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


@router.get("/flows/history", response_model=FlowPage, summary="Closed flows, newest first")
def flow_history(
    who: Viewer,
    db: Db,
    client: str | None = Query(default=None, max_length=64, description="client IP (exact)"),
    server: str | None = Query(default=None, max_length=64, description="server IP (exact)"),
    flow_class: str | None = Query(default=None, alias="class", max_length=64),
    action: Action | None = None,
    path: FlowPath | None = Query(default=None, description="how the flow crossed the satellite"),
    site: str | None = Query(default=None, max_length=64, description="the client's remote site ('other': none)"),
    since: float | None = Query(default=None, ge=0, le=1e11, description="ended at or after (unix s)"),
    until: float | None = Query(default=None, ge=0, le=1e11, description="ended before (unix s)"),
    limit: int = Query(default=100, ge=1, le=1000),
    offset: int = Query(default=0, ge=0, le=10_000_000),
) -> FlowPage:
    conds = FlowFilter(client, server, flow_class, action, path, site, since, until).conditions()
    total = db.scalar(select(func.count()).select_from(FlowRecord).where(*conds)) or 0
    rows = db.scalars(
        select(FlowRecord)
        .where(*conds)
        .order_by(FlowRecord.ended_at.desc(), FlowRecord.id.desc())
        .limit(limit)
        .offset(offset)
    )
    flows = [FlowRecordOut.model_validate(r, from_attributes=True) for r in rows]
    return FlowPage(flows=flows, total=total, limit=limit, offset=offset)


@router.get("/stats/series", response_model=SeriesOut, summary="Time series, downsampled to ≤ 720 points per key")
def stats_series(
    who: Viewer,
    db: Db,
    ctx: Ctx,
    metric: stats.Metric,
    start: int | None = Query(default=None, ge=0, le=10**11, description="unix s; default end - 1 h"),
    end: int | None = Query(default=None, ge=0, le=10**11, description="unix s; default now"),
    key: str | None = Query(default=None, max_length=64),
) -> SeriesOut:
    now = time.time()
    end_ = end if end is not None else int(now) + 1
    start_ = start if start is not None else end_ - 3600
    if start_ >= end_:
        raise ApiError(422, "bad_range", "start must be before end", "start")
    res, step, data = stats.series(db, ctx.settings, metric, start_, end_, now, key)
    return SeriesOut(
        metric=metric,
        resolution_s=res,
        step_s=step,
        start=start_,
        end=end_,
        series=[Series(key=k, points=[SeriesPoint(ts=t, avg=a, max=m) for t, a, m in pts]) for k, pts in data.items()],
    )
