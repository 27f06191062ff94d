from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from perigee_api.core.config import Settings
from perigee_api.main import create_app
from perigee_api.models import FlowRecord, Sample1h, Sample1m, Sample1s
from perigee_api.schemas.api import FLOWS_EVENT, FlowsEvent
from perigee_api.services import stats
from perigee_fakes.fake_gateway import FakeGateway, make_flow

T0 = 1_800_000_000  # a fixed, minute- and hour-aligned unix time


def test_collector_ingests_live_closed_counters(app: FastAPI, fake_gw: FakeGateway, viewer: TestClient) -> None:
    ctx = app.state.ctx
    t0 = int(time.time())
    fake_gw.live_flows = [
        make_flow(1, cls="web"),
        make_flow(2, cls="bulk", client="[fd71:1::10]:40001", server="[fd71:3::10]:5001"),
    ]
    fake_gw.closed_ring = [
        make_flow(
            10 + i,
            state="closed",
            cls="web",
            client=f"10.71.1.{10 + i % 2}:4{i:04d}",
            path="peer" if i < 3 else "direct",
        )
        for i in range(5)
    ]
    fake_gw.counters["by_class"] = {"web": {"bytes_up": 0, "bytes_down": 0, "flows": 0, "retrans_segments": 0}}
    ctx.collector.tick(now=t0)
    fake_gw.counters["by_action"]["accelerate"]["bytes_down"] = 1_000_000
    fake_gw.counters["by_class"]["web"].update(bytes_up=1_000, bytes_down=125_000)
    fake_gw.counters["by_action"]["bypass"]["bytes"] = 250_000
    fake_gw.cache_stats.update(requests=10, hits=4)
    fake_gw.dns_stats.update(queries=20, cache_hits=15)
    ctx.collector.tick(now=t0 + 1)
    assert fake_gw.closed_ring == []  # drained
    snap = viewer.get("/api/v1/flows").json()
    assert snap["count"] == 2 and {f["class"] for f in snap["flows"]} == {"web", "bulk"}
    hist = viewer.get("/api/v1/flows/history").json()
    assert hist["total"] == 5
    only = viewer.get("/api/v1/flows/history", params={"client": "10.71.1.11", "class": "web"}).json()
    assert only["total"] == 2 and all(f["client"].startswith("10.71.1.11:") for f in only["flows"])
    page = viewer.get("/api/v1/flows/history", params={"limit": 2, "offset": 4}).json()
    assert len(page["flows"]) == 1
    assert viewer.get("/api/v1/flows/history", params={"action": "bypass"}).json()["total"] == 0
    # How each flow crossed the satellite is kept and filterable (the peer path or not).
    peer = viewer.get("/api/v1/flows/history", params={"path": "peer"}).json()
    assert peer["total"] == 3 and {f["path"] for f in peer["flows"]} == {"peer"}
    assert viewer.get("/api/v1/flows/history", params={"path": "direct"}).json()["total"] == 2
    assert viewer.get("/api/v1/flows/history", params={"path": "tunnel"}).status_code == 422
    assert {f["path"] for f in snap["flows"]} == {"direct"}
    with ctx.db.session() as db:
        rows = {(r.metric, r.key): r.avg for r in db.scalars(select(Sample1s).where(Sample1s.ts == t0 + 1))}
    assert rows[("action_bps", "accelerate")] == 8_000_000
    assert rows[("action_bps", "bypass")] == 2_000_000
    assert rows[("cache_hit_ratio", "")] == 0.4
    assert rows[("dns_hit_ratio", "")] == 0.75
    assert rows[("dns_qps", "")] == 20
    assert rows[("leg_rtt_ms", "satellite")] == 600 and rows[("leg_rtt_ms", "terrestrial")] == 20
    assert rows[("class_bps", "web")] == 1_008_000  # the class's satellite payload, both directions (counters)


def test_dns_samples_skip_a_gateway_restart_and_a_missing_resolver() -> None:
    b = stats.SampleBuilder()

    def dns_samples(ts: int, reading: dict[str, int] | None) -> list[tuple[str, str, float]]:
        return [s for s in b.build(ts, [], None, None, reading) if s[0].startswith("dns_")]

    assert dns_samples(T0, {"queries": 100, "cache_hits": 80}) == []
    assert dns_samples(T0 + 2, {"queries": 110, "cache_hits": 89}) == [("dns_qps", "", 5.0), ("dns_hit_ratio", "", 0.9)]
    # Counters went back (the gateway restarted): no sample rather than a negative one.
    assert dns_samples(T0 + 3, {"queries": 3, "cache_hits": 1}) == []
    # No queries in the interval: a rate of 0, no ratio.
    assert dns_samples(T0 + 4, {"queries": 3, "cache_hits": 1}) == [("dns_qps", "", 0.0)]
    # An older gateway without /v1/dns: nothing.
    assert dns_samples(T0 + 5, None) == []


def test_live_flows_filtered_and_limited_match_the_snapshot(
    app: FastAPI, fake_gw: FakeGateway, viewer: TestClient
) -> None:
    ctx = app.state.ctx
    actions = ("accelerate", "cache", "bypass")
    fake_gw.live_flows = [make_flow(i, action=actions[i % 3]) for i in range(10)]
    ctx.collector.tick()
    whole = viewer.get("/api/v1/flows").json()
    assert whole["count"] == 10 and [f["id"] for f in whole["flows"]] == [f["id"] for f in fake_gw.live_flows]
    cached = viewer.get("/api/v1/flows").json()  # served from the per-snapshot encoding
    assert cached == whole
    only = viewer.get("/api/v1/flows", params={"action": "cache"}).json()
    assert only["count"] == 3 and [f["action"] for f in only["flows"]] == ["cache"] * 3
    assert only["flows"] == [f for f in whole["flows"] if f["action"] == "cache"]
    assert only["now"] == whole["now"] and only["error"] is None
    few = viewer.get("/api/v1/flows", params={"limit": 2, "action": "bypass"}).json()
    assert few["count"] == 3 and len(few["flows"]) == 2
    # A new snapshot is encoded anew, never served from the previous one.
    fake_gw.live_flows = [make_flow(99, action="cache")]
    ctx.collector.tick()
    fresh = viewer.get("/api/v1/flows", params={"action": "cache"}).json()
    assert fresh["count"] == 1 and fresh["flows"][0]["id"] == fake_gw.live_flows[0]["id"]


def _fill(app: FastAPI, start: int, seconds: int) -> None:
    with app.state.ctx.db.session() as db:
        for s in range(seconds):
            stats.store_samples(db, start + s, [("link_bps", "down", float(s % 60)), ("link_bps", "up", 1.0)])
        db.commit()


def test_rollup_downsampling_and_retention(app: FastAPI, settings: Settings) -> None:
    ctx = app.state.ctx
    _fill(app, T0, 7200)  # two hours of 1 s samples
    with ctx.db.session() as db:
        stats.rollup(db, T0 + 7200)
        stats.rollup(db, T0 + 7200)  # idempotent
        db.commit()
        m = db.scalars(select(Sample1m).where(Sample1m.key == "down").order_by(Sample1m.ts)).all()
        assert len(m) == 120 and m[0].ts == T0 and m[0].n == 60
        assert m[0].avg == sum(range(60)) / 60 and m[0].max == 59
        h = db.scalars(select(Sample1h).where(Sample1h.key == "down").order_by(Sample1h.ts)).all()
        assert [x.ts for x in h] == [T0, T0 + 3600] and h[0].n == 3600 and h[0].avg == 29.5
        # series: 2 h from 1 s data → ≤ 720 points per key, step a multiple of 1 s
        res, step, data = stats.series(db, settings, "link_bps", T0, T0 + 7200, now=T0 + 7200)
        assert res == 1 and step == 10 and len(data["down"]) == 720
        # 30 days → hourly table
        res, step, data = stats.series(db, settings, "link_bps", T0 + 7200 - 30 * 86400, T0 + 7200, now=T0 + 7200)
        assert res == 3600 and step == 3600 and len(data["down"]) == 2
        # retention drops old 1 s rows first; rollups survive
        removed = stats.enforce_retention(db, settings, T0 + 7200 + settings.retain_1s_s)
        db.commit()
        assert removed["samples_1s"] == 2 * 7200
        assert db.scalar(select(func.count()).select_from(Sample1m)) == 240
        res, _, data = stats.series(db, settings, "link_bps", T0, T0 + 7200, now=T0 + 14400)
        assert res == 60 and len(data["down"]) == 120


def test_flow_retention_by_age_and_rows(app: FastAPI, settings: Settings) -> None:
    ctx = app.state.ctx
    with ctx.db.session() as db:
        flows = [make_flow(i, state="closed", now=T0 + i) for i in range(50)]
        assert stats.store_closed_flows(db, [*flows, {"bogus": True}], T0) == 50
        db.commit()
        settings.retain_flows_max_rows = 30
        stats.enforce_retention(db, settings, T0 + 10 + settings.retain_flows_s)
        db.commit()
        left = db.scalars(select(FlowRecord.gateway_id).order_by(FlowRecord.gateway_id)).all()
    assert left == list(range(20, 50))


def test_history_survives_restart(settings: Settings, fake_gw: FakeGateway) -> None:
    app1 = create_app(settings)
    fake_gw.closed_ring = [make_flow(1, state="closed")]
    app1.state.ctx.collector.tick(now=time.time())
    app1.state.ctx.db.dispose()
    app2 = create_app(settings)
    with app2.state.ctx.db.session() as db:
        assert db.scalar(select(func.count()).select_from(FlowRecord)) == 1
    app2.state.ctx.db.dispose()


def test_series_endpoint(viewer: TestClient, app: FastAPI) -> None:
    now = int(time.time())
    _fill(app, now - 600, 600)
    r = viewer.get("/api/v1/stats/series", params={"metric": "link_bps", "start": now - 3600, "end": now})
    body = r.json()
    assert r.status_code == 200 and body["resolution_s"] == 1 and body["step_s"] == 5
    assert {s["key"] for s in body["series"]} == {"down", "up"}
    r = viewer.get("/api/v1/stats/series", params={"metric": "nope"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "query.metric"
    r = viewer.get("/api/v1/stats/series", params={"metric": "link_bps", "start": 10, "end": 5})
    assert r.status_code == 422


def test_sse_stream_yields_flows(app: FastAPI, fake_gw: FakeGateway, viewer: TestClient) -> None:
    fake_gw.live_flows = [make_flow(7, cls="web")]
    app.state.ctx.collector.tick()
    with viewer.stream("GET", "/api/v1/flows/stream", params={"max_events": 1}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        text = "".join(r.iter_text())
    assert "event: flows" in text
    data = next(line for line in text.splitlines() if line.startswith("data: "))
    assert '"id": 7' in data
    # The event is the API's FlowsEvent model (what the dashboard reads), nothing else.
    event = FlowsEvent.model_validate_json(data.removeprefix("data: "))
    assert [f.id for f in event.flows] == [7] and event.seq >= 0
    assert {line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("event: ")} == {FLOWS_EVENT}


def test_live_flows_refreshed_when_collector_idle(fake_gw: FakeGateway, viewer: TestClient) -> None:
    fake_gw.live_flows = [make_flow(42)]
    snap = viewer.get("/api/v1/flows").json()
    assert snap["count"] == 1 and snap["flows"][0]["id"] == 42 and snap["error"] is None
    fake_gw.stop()
    app_ctx = viewer.app.state.ctx  # type: ignore[attr-defined]
    app_ctx.live.fetched_at = 0.0
    snap = viewer.get("/api/v1/flows").json()
    assert snap["error"] and snap["count"] == 1  # last known flows, with the reason they are stale


def test_the_link_is_the_satellite_interface_and_the_split_part_is_shown_beside_it() -> None:
    b = stats.SampleBuilder()

    def link(ts: int, split: tuple[int, int], iface: tuple[int, int] | None) -> dict[str, float]:
        c: dict[str, Any] = {"link": {"forward_bytes": split[0], "return_bytes": split[1]}}
        if iface is not None:
            c["link"]["interface"] = {"forward_bytes": iface[0], "return_bytes": iface[1]}
        return {f"{m}/{k}": v for m, k, v in b.build(ts, [], c, None) if m.startswith("link")}

    assert link(T0, (0, 0), (0, 0)) == {}
    # Bypassed ESP and UDP cross the interface beside the split flows: the link is the interface.
    got = link(T0 + 2, (1_000_000, 100_000), (1_250_000, 400_000))
    assert got == {
        "link_bps/down": 5_000_000.0,
        "link_bps/up": 1_600_000.0,
        "link_split_bps/down": 4_000_000.0,
        "link_split_bps/up": 400_000.0,
    }
    # A gateway without interface counters: the intercepted estimate is all there is.
    b2 = stats.SampleBuilder()
    b2.build(T0, [], {"link": {"forward_bytes": 0, "return_bytes": 0}}, None)
    only = {f"{m}/{k}": v for m, k, v in b2.build(T0 + 1, [], {"link": {"forward_bytes": 10, "return_bytes": 0}}, None)}
    assert only["link_bps/down"] == 80.0 and only["link_split_bps/down"] == 80.0


def test_closed_flows_count_what_crossed_the_satellite() -> None:
    # A hub flow whose server handed over 10 MB of which 2.2 MB crossed before a reset: 2.2 MB is what is stored.
    hub = make_flow(1, bytes_down=10_000_000)
    hub["legs"]["satellite"] = "client"
    hub["legs"]["client"].update(bytes_acked=2_200_000, bytes_received=700)
    assert stats.satellite_bytes(hub) == (700, 2_200_000)
    # At a terminal the satellite leg is the server socket: what it received came down.
    terminal = make_flow(2, bytes_down=5_000)
    terminal["legs"]["satellite"] = "server"
    terminal["legs"]["server"].update(bytes_acked=300, bytes_received=4_000)
    assert stats.satellite_bytes(terminal) == (300, 4_000)
    assert stats.satellite_bytes({"bytes_up": 1, "bytes_down": 2}) == (1, 2)
