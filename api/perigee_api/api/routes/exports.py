"""The closed-flow history as CSV, with the same filters as the paged list."""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Iterator

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse
from sqlalchemy import select

from perigee_api.api.deps import Ctx, Viewer
from perigee_api.core.errors import ErrorResponse
from perigee_api.models import FlowRecord
from perigee_api.services.flow_query import FlowFilter
from perigee_control.reports import Action, FlowPath

router = APIRouter(tags=["flows"], responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}})

COLUMNS = (
    "ended_at",
    "started_at",
    "duration_s",
    "client",
    "server",
    "class",
    "action",
    "site",
    "path",
    "relay",
    "dscp",
    "bytes_down",
    "bytes_up",
    "sat_srtt_ms",
    "end_reason",
)
BATCH = 2000


def _cell(v: object) -> object:
    # A spreadsheet runs a cell that starts with = + - @ as a formula: quote such text (never numbers).
    if isinstance(v, str) and v[:1] in ("=", "+", "-", "@"):
        return "'" + v
    return v


def _row(f: FlowRecord) -> list[object]:
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(f.ended_at))
    srtt = round(f.sat_srtt_us / 1000, 1) if f.sat_srtt_us is not None else ""
    values: list[object] = [
        iso,
        round(f.started_at, 3),
        round(f.ended_at - f.started_at, 3),
        f.client,
        f.server,
        f.flow_class or "",
        f.action or "",
        f.site or "",
        f.path or "",
        f.relay or "",
        "" if f.dscp is None else f.dscp,
        f.bytes_down,
        f.bytes_up,
        srtt,
        f.end_reason or "",
    ]
    return [_cell(v) for v in values]


@router.get(
    "/flows/history.csv",
    summary="Closed flows as CSV (newest first), with the filters of /flows/history",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/csv": {}}}},
)
def flow_history_csv(
    who: Viewer,
    ctx: Ctx,
    client: str | None = Query(default=None, max_length=64, description="client IP (exact)"),
    server: str | None = Query(default=None, max_length=64, description="server IP (exact)"),
    flow_class: str | None = Query(default=None, alias="class", max_length=64),
    action: Action | None = None,
    path: FlowPath | None = None,
    site: str | None = Query(default=None, max_length=64),
    since: float | None = Query(default=None, ge=0, le=1e11, description="ended at or after (unix s)"),
    until: float | None = Query(default=None, ge=0, le=1e11, description="ended before (unix s)"),
    limit: int = Query(default=100_000, ge=1, le=1_000_000, description="at most this many rows"),
) -> StreamingResponse:
    conds = FlowFilter(client, server, flow_class, action, path, site, since, until).conditions()

    def rows() -> Iterator[bytes]:
        buf = io.StringIO()
        out = csv.writer(buf, lineterminator="\r\n")
        out.writerow(COLUMNS)
        sent = 0
        last: tuple[float, int] | None = None
        # Keyset pages: each its own short session, so a slow download holds no read transaction.
        while sent < limit:
            q = select(FlowRecord).where(*conds)
            if last is not None:
                q = q.where(
                    (FlowRecord.ended_at < last[0]) | ((FlowRecord.ended_at == last[0]) & (FlowRecord.id < last[1]))
                )
            q = q.order_by(FlowRecord.ended_at.desc(), FlowRecord.id.desc()).limit(min(BATCH, limit - sent))
            with ctx.db.session() as db:
                page = list(db.scalars(q))
                for f in page:
                    out.writerow(_row(f))
            if not page:
                break
            sent += len(page)
            last = (page[-1].ended_at, page[-1].id)
            yield buf.getvalue().encode()
            buf.seek(0)
            buf.truncate()
        if buf.tell():
            yield buf.getvalue().encode()

    name = time.strftime("perigee-flows-%Y%m%d-%H%M%S.csv", time.gmtime())
    return StreamingResponse(
        rows(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{name}"', "Cache-Control": "no-store"},
    )
