"""Rates from the gateway's counters (link, classes, sites), the per-site view, top talkers, the closed-flow
filters and the CSV export."""

from __future__ import annotations

import csv
import io
import time
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from perigee_api.services import collector, stats
from perigee_fakes.fake_gateway import FakeGateway, make_flow

T0 = 1_800_000_000


def counters(forward: int, ret: int, sites: dict[str, tuple[int, int, int, int]] | None = None) -> dict[str, Any]:
    """A /v1/counters reading: link bytes, and per site (bytes_up, bytes_down, retrans, cache_saved)."""
    return {
        "link": {
            "forward_bytes": forward,
            "return_bytes": ret,
            "forward_payload_bytes": forward,
            "return_payload_bytes": ret,
        },
        "by_action": {},
        "by_class": {},
        "by_site": {
            k: {"bytes_up": u, "bytes_down": d, "flows": 1, "retrans_segments": r, "cache_saved_bytes": c}
            for k, (u, d, r, c) in (sites or {}).items()
        },
    }


def values(out: list[tuple[str, str, float]], metric: str) -> dict[str, float]:
    return {k: v for m, k, v in out if m == metric}


def test_link_rate_is_the_counters_delta_not_the_live_flows() -> None:
    b = stats.SampleBuilder()
    # A live flow claims 180 Mbit/s (what it wrote into its buffer); the link counters say otherwise.
    live = [make_flow(1, rate_down_bps=180e6)]
    assert values(b.build(T0, live, counters(0, 0), None), "link_bps") == {}
    out = b.build(T0 + 2, live, counters(12_500_000, 250_000), None)
    assert values(out, "link_bps") == {"down": 50e6, "up": 1e6}
    # Counters that went back (the gateway restarted): no sample, never a negative rate.
    assert values(b.build(T0 + 3, live, counters(10, 10), None), "link_bps") == {}
    # A gateway without link counters: the live flows are all there is.
    old = stats.SampleBuilder()
    assert values(old.build(T0, live, {"by_action": {}}, None), "link_bps") == {"down": 180e6, "up": 1000.0}


def test_site_rates_flows_and_rtt() -> None:
    b = stats.SampleBuilder()
    live = [make_flow(1, site="ship-a"), make_flow(2, site="ship-a"), make_flow(3)]
    b.build(T0, live, counters(0, 0, {"ship-a": (0, 0, 0, 0)}), None)
    out = b.build(T0 + 1, live, counters(0, 0, {"ship-a": (1000, 100_000, 3, 5000), "other": (0, 10, 0, 0)}), None)
    assert values(out, "site_down_bps") == {"ship-a": 800_000.0, "other": 80.0}
    assert values(out, "site_up_bps")["ship-a"] == 8000.0
    assert values(out, "site_retrans_ps")["ship-a"] == 3.0
    assert values(out, "site_saved_bps")["ship-a"] == 40_000.0
    assert values(out, "site_flows") == {"ship-a": 2.0, "other": 1.0}
    assert values(out, "site_rtt_ms") == {"ship-a": 600.0, "other": 600.0}


def test_collector_reads_a_little_after_each_whole_second() -> None:
    assert abs(collector.next_reading_in(T0 + 0.3, 1.0) - 0.1) < 1e-6
    assert abs(collector.next_reading_in(T0 + 0.5, 1.0) - 0.9) < 1e-6
    assert abs(collector.next_reading_in(T0 + 0.4, 1.0) - 1.0) < 1e-6


def closed(i: int, site: str, client: str, cls: str = "web", down: int = 1000) -> dict[str, Any]:
    f = make_flow(i, state="closed", site=site, client=client, cls=cls, bytes_down=down, now=time.time() - 60 + i)
    return f


def test_history_filters_by_site_and_exports_csv(app: FastAPI, fake_gw: FakeGateway, viewer: TestClient) -> None:
    fake_gw.closed_ring = [
        closed(1, "ship-a", "10.71.1.10:40001", down=5000),
        closed(2, "ship-a", "10.71.1.11:40002", cls="bulk"),
        closed(3, "other", "10.9.9.9:40003"),
    ]
    fake_gw.closed_ring[0]["relay"] = "squid"
    fake_gw.closed_ring[0]["dscp"] = 46
    app.state.ctx.collector.tick()
    page = viewer.get("/api/v1/flows/history", params={"site": "ship-a"}).json()
    assert page["total"] == 2 and {f["site"] for f in page["flows"]} == {"ship-a"}
    squid = [f for f in page["flows"] if f["relay"] == "squid"]
    assert len(squid) == 1 and squid[0]["dscp"] == 46
    r = viewer.get("/api/v1/flows/history.csv", params={"site": "ship-a", "class": "web"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert "attachment" in r.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert len(rows) == 1 and rows[0]["client"] == "10.71.1.10:40001" and rows[0]["bytes_down"] == "5000"
    assert rows[0]["relay"] == "squid" and rows[0]["dscp"] == "46" and rows[0]["site"] == "ship-a"
    everything = list(csv.DictReader(io.StringIO(viewer.get("/api/v1/flows/history.csv").text)))
    assert [row["client"].split(":")[0] for row in everything] == ["10.9.9.9", "10.71.1.11", "10.71.1.10"]
    # Paged by keyset without losing or repeating rows.
    one = list(csv.DictReader(io.StringIO(viewer.get("/api/v1/flows/history.csv", params={"limit": 1}).text)))
    assert len(one) == 1
    assert viewer.get("/api/v1/flows/history.csv", params={"action": "nope"}).status_code == 422


def test_csv_cells_never_start_a_formula(app: FastAPI, fake_gw: FakeGateway, viewer: TestClient) -> None:
    f = closed(1, "ship-a", "10.71.1.10:40001")
    f["end_reason"] = "=HYPERLINK(1)"
    fake_gw.closed_ring = [f]
    app.state.ctx.collector.tick()
    rows = list(csv.DictReader(io.StringIO(viewer.get("/api/v1/flows/history.csv").text)))
    assert rows[0]["end_reason"] == "'=HYPERLINK(1)"


def test_top_talkers_by_site_and_client(app: FastAPI, fake_gw: FakeGateway, viewer: TestClient) -> None:
    fake_gw.closed_ring = [
        closed(1, "ship-a", "10.71.1.10:40001", down=5000),
        closed(2, "ship-a", "10.71.1.11:40002", down=1000),
        closed(3, "ship-b", "10.72.1.10:40003", down=3000),
    ]
    fake_gw.live_flows = [make_flow(9, site="ship-b", client="10.72.1.10:41000", bytes_down=10_000, bytes_up=0)]
    app.state.ctx.collector.tick()
    sites = viewer.get("/api/v1/stats/top-talkers", params={"by": "site"}).json()
    assert [(t["key"], t["bytes_down"], t["flows"]) for t in sites["talkers"]] == [
        ("ship-b", 13_000, 2),
        ("ship-a", 6000, 2),
    ]
    clients = viewer.get("/api/v1/stats/top-talkers", params={"by": "client", "limit": 2}).json()
    assert [(t["key"], t["site"]) for t in clients["talkers"]] == [("10.72.1.10", "ship-b"), ("10.71.1.10", "ship-a")]
    # A range in the past: only the closed flows that ended in it, none of them here.
    past = viewer.get("/api/v1/stats/top-talkers", params={"start": 1000, "end": 2000}).json()
    assert past["talkers"] == []
    assert viewer.get("/api/v1/stats/top-talkers", params={"start": 5, "end": 5}).status_code == 422


def test_sites_now_lists_configured_sites_with_the_last_second(
    app: FastAPI, fake_gw: FakeGateway, operator: TestClient
) -> None:
    cfg = operator.get("/api/v1/config").json()["config"]
    cfg["sites"] = [{"name": "ship-a", "prefixes": ["10.71.1.0/24"]}, {"name": "quiet", "prefixes": ["10.99.0.0/16"]}]
    assert operator.put("/api/v1/config", json={"config": cfg, "comment": "sites"}).status_code == 200
    fake_gw.live_flows = [make_flow(1, site="ship-a")]

    # The gateway's whole counters, with these link and site figures (its answers are schema-checked).
    def reading(site: tuple[int, int, int, int]) -> dict[str, Any]:
        return {k: v for k, v in counters(0, 0, {"ship-a": site}).items() if k != "by_action"}

    fake_gw.counters.update(reading((0, 0, 0, 0)))
    ctx = app.state.ctx
    t0 = int(time.time())  # not a fixed time: the collector's housekeeping would expire the session
    ctx.collector.tick(now=t0)
    fake_gw.counters.update(reading((0, 125_000, 2, 0)))
    ctx.collector.tick(now=t0 + 1)
    r = operator.get("/api/v1/sites")
    assert r.status_code == 200, r.text
    body = r.json()
    by = {s["site"]: s for s in body["sites"]}
    assert list(by) == ["ship-a", "quiet", "other"]
    assert by["ship-a"]["down_bps"] == 1e6 and by["ship-a"]["flows"] == 1 and by["ship-a"]["retrans_ps"] == 2.0
    assert by["ship-a"]["prefixes"] == ["10.71.1.0/24"] and by["ship-a"]["rtt_ms"] == 600.0
    assert by["quiet"]["flows"] == 0 and by["quiet"]["rtt_ms"] is None


def test_bypass_counts_per_rule(app: FastAPI, fake_gw: FakeGateway, viewer: TestClient) -> None:
    fake_gw.counters["bypass_rules"] = [
        {"name": "ipsec-esp", "kind": "bypass", "builtin": True, "packets": 12, "bytes": 3400},
        {"name": "voip", "kind": "class", "builtin": False, "packets": 5, "bytes": 500},
    ]
    app.state.ctx.collector.tick()
    body = viewer.get("/api/v1/stats/bypass").json()
    assert [(r["name"], r["kind"], r["packets"]) for r in body["rules"]] == [
        ("ipsec-esp", "bypass", 12),
        ("voip", "class", 5),
    ]
