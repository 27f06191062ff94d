"""The per-site view (a hub serving many terminals): each site's figures now, and the top talkers (sites or
client addresses) over a time range."""

from __future__ import annotations

import time
from typing import Any, Literal, get_args

from fastapi import APIRouter, Query
from sqlalchemy import func, select

from perigee_api.api.deps import Ctx, Db, Viewer
from perigee_api.core.errors import ApiError, ErrorResponse
from perigee_api.models import FlowRecord
from perigee_api.schemas.api import (
    BypassCountsOut,
    BypassRuleCount,
    SiteNow,
    SitesOut,
    TopTalker,
    TopTalkersOut,
)
from perigee_api.services import stats, versions
from perigee_control.reports import BypassRuleKind

# What a bypass counter counts: a bypass entry, or a class whose action is bypass (the gateway's schema).
BYPASS_RULE_KINDS: tuple[str, ...] = get_args(BypassRuleKind.__value__)

router = APIRouter(tags=["sites"], responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}})


@router.get(
    "/sites",
    response_model=SitesOut,
    summary="Each remote site now: throughput, flows, RTT, retransmissions, "
    "cache savings (the collector's last second)",
)
def sites_now(who: Viewer, db: Db, ctx: Ctx) -> SitesOut:
    configured: list[dict[str, Any]] = list(versions.latest(db).config.get("sites") or [])
    latest = ctx.latest
    names = [str(s["name"]) for s in configured]
    for metric in ("site_down_bps", "site_up_bps", "site_flows"):
        names += [k for k in latest.get(metric, {}) if k not in names]
    if stats.OTHER_SITE not in names:
        names.append(stats.OTHER_SITE)
    prefixes = {str(s["name"]): [str(p) for p in s.get("prefixes", [])] for s in configured}

    def value(metric: str, site: str) -> float | None:
        return latest.get(metric, {}).get(site)

    out = [
        SiteNow(
            site=name,
            prefixes=prefixes.get(name, []),
            down_bps=value("site_down_bps", name) or 0.0,
            up_bps=value("site_up_bps", name) or 0.0,
            flows=int(value("site_flows", name) or 0),
            rtt_ms=value("site_rtt_ms", name),
            retrans_ps=value("site_retrans_ps", name) or 0.0,
            cache_saved_bps=value("site_saved_bps", name) or 0.0,
        )
        for name in names
    ]
    return SitesOut(sites=out, updated_at=ctx.latest_at or None)


@router.get(
    "/stats/top-talkers",
    response_model=TopTalkersOut,
    summary="The sites or client addresses that moved "
    "the most bytes over a time range: flows that ended in it, and the flows open now when it reaches now",
)
def top_talkers(
    who: Viewer,
    db: Db,
    ctx: Ctx,
    by: Literal["site", "client"] = "site",
    start: int | None = Query(default=None, ge=0, le=10**11, description="unix s; default end - 1 h"),
    end: int | None = Query(default=None, ge=0, le=10**11, description="unix s; default now"),
    limit: int = Query(default=10, ge=1, le=100),
) -> TopTalkersOut:
    now = time.time()
    end_ = end if end is not None else int(now) + 1
    start_ = start if start is not None else end_ - 3600
    if start_ >= end_:
        raise ApiError(422, "bad_range", "start must be before end", "start")
    key = FlowRecord.site if by == "site" else FlowRecord.client_ip
    totals: dict[str, dict[str, Any]] = {}
    rows = db.execute(
        select(
            key,
            func.max(FlowRecord.site),
            func.sum(FlowRecord.bytes_down),
            func.sum(FlowRecord.bytes_up),
            func.count(),
        )
        .where(FlowRecord.ended_at >= start_, FlowRecord.ended_at < end_)
        .group_by(key)
    )
    for k, site, down, up, n in rows:
        name = str(k) if k is not None else stats.OTHER_SITE
        t = totals.setdefault(name, {"site": site, "bytes_down": 0, "bytes_up": 0, "flows": 0})
        t["bytes_down"] += int(down or 0)
        t["bytes_up"] += int(up or 0)
        t["flows"] += int(n)
    if end_ >= now - 1:
        flows, _, _ = ctx.live.snapshot()
        for f in flows:
            site = str(f.get("site") or stats.OTHER_SITE)
            name = site if by == "site" else stats.host_of(str(f.get("client", "")))
            t = totals.setdefault(name, {"site": site, "bytes_down": 0, "bytes_up": 0, "flows": 0})
            t["bytes_down"] += int(f.get("bytes_down") or 0)
            t["bytes_up"] += int(f.get("bytes_up") or 0)
            t["flows"] += 1
    ranked = sorted(totals.items(), key=lambda kv: kv[1]["bytes_down"] + kv[1]["bytes_up"], reverse=True)[:limit]
    return TopTalkersOut(
        by=by,
        start=start_,
        end=end_,
        talkers=[
            TopTalker(
                key=k,
                site=v["site"] if by == "client" else k,
                bytes_down=v["bytes_down"],
                bytes_up=v["bytes_up"],
                flows=v["flows"],
            )
            for k, v in ranked
        ],
    )


@router.get(
    "/stats/bypass",
    response_model=BypassCountsOut,
    summary="Traffic accepted untouched, per bypass rule (the gateway's nft counters as the collector last read them)",
)
def bypass_counts(who: Viewer, ctx: Ctx) -> BypassCountsOut:
    rules = (ctx.counters or {}).get("bypass_rules") or []
    out = []
    for r in rules:
        if isinstance(r, dict) and r.get("kind") in BYPASS_RULE_KINDS:
            out.append(
                BypassRuleCount(
                    name=str(r.get("name", "")),
                    kind=r["kind"],
                    builtin=bool(r.get("builtin")),
                    packets=int(r.get("packets") or 0),
                    bytes=int(r.get("bytes") or 0),
                )
            )
    return BypassCountsOut(rules=out, updated_at=ctx.latest_at or None)
