"""The satellite leg's congestion control: what each flow runs and why, and how much each retransmits (docs/hybla.md,
*What the operator sees*), beside the peer path's counters. Its history is the `sat_retrans_pct` series
(/stats/series)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from fastapi import APIRouter
from pydantic import ValidationError

from perigee_api.api.deps import Ctx, Viewer
from perigee_api.core.errors import ErrorResponse
from perigee_api.schemas.api import LiveCcSplit, SatelliteCcCount, SatelliteStatsOut
from perigee_control.reports import PeerCounters

router = APIRouter(tags=["flows"], responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}})


def _counts(by: Any) -> list[SatelliteCcCount]:
    """One entry per key of a `by_congestion_control`/`by_cc_reason` map (an older gateway has none)."""
    out = []
    for key, c in sorted((by or {}).items()) if isinstance(by, dict) else []:
        if not isinstance(c, dict):
            continue
        segments, retrans = int(c.get("segments") or 0), int(c.get("retrans_segments") or 0)
        out.append(
            SatelliteCcCount(
                key=str(key),
                flows=int(c.get("flows") or 0),
                segments=segments,
                retrans_segments=retrans,
                retransmit_pct=100 * retrans / segments if segments else None,
            )
        )
    return out


def _peer(section: Any) -> PeerCounters | None:
    """The gateway's peer-path counters as the collector read them; None when it has not or they do not parse."""
    try:
        return PeerCounters.model_validate(section) if isinstance(section, dict) else None
    except ValidationError:
        return None


def live_split(flows: list[dict[str, Any]]) -> list[LiveCcSplit]:
    """Live flows by what their satellite leg runs and why; flows without a `satellite` report are not counted."""
    split: Counter[tuple[str, str]] = Counter()
    for f in flows:
        leg = f.get("satellite")
        if isinstance(leg, dict) and leg.get("cc") and leg.get("cc_reason"):
            split[(str(leg["cc"]), str(leg["cc_reason"]))] += 1
    return [LiveCcSplit(cc=cc, cc_reason=reason, flows=n) for (cc, reason), n in sorted(split.items())]


@router.get(
    "/stats/satellite",
    response_model=SatelliteStatsOut,
    summary="The satellite leg per congestion control and per reason it runs it: live flows now, and flows, "
    "segments and retransmissions since the gateway started, and the peer path's counters "
    "(the collector's last reading)",
)
def satellite_stats(who: Viewer, ctx: Ctx) -> SatelliteStatsOut:
    counters = ctx.counters or {}
    flows, _now, _seq = ctx.live.snapshot()
    return SatelliteStatsOut(
        live=live_split(flows),
        by_congestion_control=_counts(counters.get("by_congestion_control")),
        by_cc_reason=_counts(counters.get("by_cc_reason")),
        peer=_peer(counters.get("peer")),
        updated_at=ctx.latest_at or None,
    )
