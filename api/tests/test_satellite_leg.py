"""The satellite leg the gateway reports per flow (its congestion control, why, its retransmissions) reaches every
reader: live flows, the live stream, closed flows and their CSV, the per-congestion-control split, and the
retransmission rate over time through the samples and their rollups."""

from __future__ import annotations

import csv
import io
import json
import time
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select

from perigee_api.core.config import Settings
from perigee_api.models import FlowRecord
from perigee_api.schemas.api import FlowsEvent
from perigee_api.services import stats
from perigee_fakes.fake_gateway import FakeGateway, make_flow

T0 = 1_800_000_000  # minute- and hour-aligned


def leg_counters(**by_cc: tuple[int, int, int]) -> dict[str, Any]:
    """A by_congestion_control / by_cc_reason map: key → (flows, segments, retransmitted)."""
    return {
        k: {"bytes_up": 0, "bytes_down": 0, "flows": f, "segments": s, "retrans_segments": r}
        for k, (f, s, r) in by_cc.items()
    }


def test_live_flows_and_the_stream_carry_the_satellite_leg(
    app: FastAPI, fake_gw: FakeGateway, viewer: TestClient
) -> None:
    fake_gw.live_flows = [
        make_flow(1, cc="hybla_ld", cc_reason="default", bytes_down=1448 * 1000, retransmitted=30),
        make_flow(2, cc="bbr", cc_reason="automatic"),
        make_flow(3, cc_reason=None),  # an older gateway: no satellite report
    ]
    app.state.ctx.collector.tick()
    flows = {f["id"]: f for f in viewer.get("/api/v1/flows").json()["flows"]}
    assert flows[1]["satellite"] == {
        "cc": "hybla_ld",
        "cc_reason": "default",
        "segments_sent": 1030,
        "segments_retransmitted": 30,
        "retransmit_pct": 100 * 30 / 1030,
    }
    assert flows[2]["satellite"]["cc_reason"] == "automatic"
    assert flows[3]["satellite"] is None
    with viewer.stream("GET", "/api/v1/flows/stream", params={"max_events": 1}) as r:
        data = next(line for line in r.iter_lines() if line.startswith("data: "))
    event = FlowsEvent.model_validate(json.loads(data[len("data: ") :]))
    legs = {f.id: f.satellite for f in event.flows}
    assert legs[1] is not None and legs[1].cc == "hybla_ld" and legs[1].segments_retransmitted == 30
    assert legs[3] is None


def test_closed_flows_keep_their_satellite_leg(app: FastAPI, fake_gw: FakeGateway, viewer: TestClient) -> None:
    fake_gw.closed_ring = [
        make_flow(10, state="closed", cc="bbr", cc_reason="class", bytes_down=1448 * 200, retransmitted=4),
        make_flow(11, state="closed", cc_reason=None),
    ]
    app.state.ctx.collector.tick()
    hist = {f["id"]: f for f in viewer.get("/api/v1/flows/history").json()["flows"]}
    (sat,) = [f["satellite"] for f in hist.values() if f["satellite"]]
    assert sat["cc"] == "bbr" and sat["cc_reason"] == "class" and sat["segments_retransmitted"] == 4
    assert [f["satellite"] for f in hist.values()].count(None) == 1
    rows = list(csv.DictReader(io.StringIO(viewer.get("/api/v1/flows/history.csv").text)))
    by_cc = {r["sat_cc"]: r for r in rows}
    assert by_cc["bbr"]["sat_cc_reason"] == "class" and by_cc["bbr"]["sat_retransmit_pct"] == "1.96"
    assert by_cc[""]["sat_retransmit_pct"] == ""


def test_a_malformed_satellite_report_is_not_stored(app: FastAPI, fake_gw: FakeGateway) -> None:
    bad = make_flow(20, state="closed")
    bad["satellite"] = {"cc": "hybla", "cc_reason": "weather"}
    with app.state.ctx.db.session() as db:
        assert stats.store_closed_flows(db, [bad], time.time()) == 1
        db.commit()
        (stored,) = db.scalars(select(FlowRecord)).all()
    assert stored.satellite is None


def test_the_split_by_congestion_control_and_reason(app: FastAPI, fake_gw: FakeGateway, viewer: TestClient) -> None:
    fake_gw.live_flows = [
        make_flow(1, cc="hybla_ld", cc_reason="default"),
        make_flow(2, cc="hybla_ld", cc_reason="default"),
        make_flow(3, cc="bbr", cc_reason="automatic"),
        make_flow(4, cc="bbr", cc_reason="class"),
        make_flow(5, cc_reason=None),
    ]
    fake_gw.counters["by_congestion_control"] = leg_counters(hybla_ld=(10, 4000, 40), bbr=(3, 1000, 0))
    fake_gw.counters["by_cc_reason"] = leg_counters(default=(10, 4000, 40), automatic=(2, 600, 0), fallback=(0, 0, 0))
    app.state.ctx.collector.tick()
    out = viewer.get("/api/v1/stats/satellite").json()
    assert {(x["cc"], x["cc_reason"]): x["flows"] for x in out["live"]} == {
        ("hybla_ld", "default"): 2,
        ("bbr", "automatic"): 1,
        ("bbr", "class"): 1,
    }
    cc = {x["key"]: x for x in out["by_congestion_control"]}
    assert cc["hybla_ld"]["retransmit_pct"] == 1.0 and cc["bbr"]["retransmit_pct"] == 0.0
    reasons = {x["key"]: x for x in out["by_cc_reason"]}
    assert reasons["fallback"]["retransmit_pct"] is None and reasons["automatic"]["segments"] == 600


def test_the_peer_paths_counters_pass_through(app: FastAPI, fake_gw: FakeGateway, viewer: TestClient) -> None:
    copies = {"packets": 180, "bytes": 245_530}
    peer = {"flows": 41, "fallbacks": 2, "refused": 1, "failed": 3, "pool_empty": 6, "redundant": copies}
    fake_gw.counters["peer"] = peer
    assert viewer.get("/api/v1/stats/satellite").json()["peer"] is None  # no reading yet
    app.state.ctx.collector.tick()
    assert viewer.get("/api/v1/stats/satellite").json()["peer"] == peer
    # A gateway from before redundancy and the empty-pool count: both read as none.
    fake_gw.counters["peer"] = {"flows": 5, "fallbacks": 0, "refused": 0}
    app.state.ctx.collector.tick()
    got = viewer.get("/api/v1/stats/satellite").json()["peer"]
    assert got == {
        "flows": 5,
        "fallbacks": 0,
        "refused": 0,
        "failed": 0,
        "pool_empty": 0,
        "redundant": {"packets": 0, "bytes": 0},
    }


def test_an_older_gateway_reports_no_split(app: FastAPI, fake_gw: FakeGateway, viewer: TestClient) -> None:
    del fake_gw.counters["by_congestion_control"], fake_gw.counters["by_cc_reason"]
    fake_gw.live_flows = [make_flow(1, cc_reason=None)]
    app.state.ctx.collector.tick()
    out = viewer.get("/api/v1/stats/satellite").json()
    assert out == {**out, "live": [], "by_congestion_control": [], "by_cc_reason": []}


def test_retransmission_rate_over_time_from_the_counters() -> None:
    b = stats.SampleBuilder()

    def cc_samples(ts: int, counters: dict[str, Any]) -> dict[tuple[str, str], float]:
        out = b.build(ts, [], {"by_congestion_control": counters}, None)
        return {(m, k): v for m, k, v in out if m.startswith("sat_")}

    assert cc_samples(T0, leg_counters(hybla_ld=(1, 1000, 10))) == {}
    assert cc_samples(T0 + 2, leg_counters(hybla_ld=(1, 3000, 50), bbr=(1, 400, 0))) == {
        ("sat_segments_ps", "hybla_ld"): 1000.0,
        ("sat_retrans_ps", "hybla_ld"): 20.0,
        ("sat_segments_ps", "bbr"): 200.0,
        ("sat_retrans_ps", "bbr"): 0.0,
    }
    # The gateway restarted (counters went back): no sample rather than a negative one.
    assert cc_samples(T0 + 3, leg_counters(hybla_ld=(1, 100, 1))) == {}


def test_the_retransmission_rate_is_the_ratio_of_sums_through_the_rollups(
    app: FastAPI, settings: Settings, viewer: TestClient
) -> None:
    ctx = app.state.ctx
    # Two minutes: the first a loud clean second and a quiet lossy one (sums: 2 % of 1010 not the mean 50.5 %),
    # the second minute bbr alone.
    samples = {
        T0 + 1: [("sat_segments_ps", "hybla_ld", 1000.0), ("sat_retrans_ps", "hybla_ld", 10.0)],
        T0 + 2: [("sat_segments_ps", "hybla_ld", 10.0), ("sat_retrans_ps", "hybla_ld", 10.0)],
        T0 + 61: [("sat_segments_ps", "bbr", 500.0), ("sat_retrans_ps", "bbr", 5.0)],
    }
    with ctx.db.session() as db:
        for ts, values in samples.items():
            stats.store_samples(db, ts, values)
        stats.rollup(db, T0 + 3600)
        db.commit()
        # The 1-minute rollup gives the same rate; its max is the highest of its rows (a minute's, not a second's).
        for res, peak in ((1, 100.0), (60, 100 * 20 / 1010)):
            table = stats.SAMPLE_TABLES[res].__tablename__
            out = stats._ratio_series(db, table, "sat_retrans_pct", T0, T0 + 120, 60, None)
            assert out["hybla_ld"] == [(T0, 100 * 20 / 1010, peak)], res
            assert out["bbr"] == [(T0 + 60, 1.0, 1.0)]
            assert out[stats.ALL_KEY] == [(T0, 100 * 20 / 1010, peak), (T0 + 60, 1.0, 1.0)]
    now = time.time()
    with ctx.db.session() as db:
        stats.store_samples(
            db, int(now) - 5, [("sat_segments_ps", "hybla_ld", 200.0), ("sat_retrans_ps", "hybla_ld", 3.0)]
        )
        db.commit()
    out = viewer.get("/api/v1/stats/series", params={"metric": "sat_retrans_pct", "start": int(now) - 60}).json()
    keys = {s["key"]: s["points"] for s in out["series"]}
    assert set(keys) == {"hybla_ld", stats.ALL_KEY}
    assert [p["avg"] for p in keys[stats.ALL_KEY]] == [1.5]
    only = viewer.get("/api/v1/stats/series", params={"metric": "sat_retrans_pct", "key": "bbr"}).json()
    assert only["series"] == []
