"""Closed-flow history, 1-second samples, rollups (1 s → 1 min → 1 h), retention and series queries.

Metrics (one row per metric and key per second). Rates come from deltas of the gateway's counters (bytes × 8 / dt),
which count what crossed the satellite, flows that opened and closed within the second and the cache's
connections included (docs/splitter.md, *Rates*); from gateways without those counters, from live flows' rates.
  link_bps         key = down|up       the satellite link, forward (down) and return (up): every frame byte the
                                       satellite interface carried (counters `link.interface`: split, cached,
                                       bypassed, unsplit, UDP, ICMP); from a gateway without it, the estimate below
  link_split_bps   key = down|up       the part of it the gateway intercepted (split flows and the cache's
                                       connections, headers included: counters `link`)
  class_bps        key = class name    satellite payload per class, both directions (counters `by_class`)
  action_bps       key = accelerate|cache|bypass   satellite payload per action (counters `by_action`; bypass: nft)
  site_down_bps    key = site name     satellite payload toward the site's clients (counters `by_site`)
  site_up_bps      key = site name     satellite payload from the site's clients
  site_saved_bps   key = site name     bytes the cache served the site's clients (not fetched over the satellite)
  site_retrans_ps  key = site name     satellite segments retransmitted per second
  site_flows       key = site name     live flows (gauge)
  site_rtt_ms      key = site name     mean smoothed RTT of the live flows' satellite legs
  cache_hit_ratio  key = ""            hits / requests over the interval (from cache stats deltas)
  dns_hit_ratio    key = ""            resolver cache hits / queries over the interval (from DNS stats deltas)
  dns_qps          key = ""            queries per second the resolver answered over the interval
  leg_rtt_ms       key = satellite|terrestrial     mean smoothed RTT over live flows' legs
Rollups store avg, max and the number of samples; a rollup bucket is written once it is complete.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Literal, get_args

from sqlalchemy import delete, func, insert, select, text
from sqlalchemy.orm import Session

from perigee_api.core.config import Settings
from perigee_api.models import SAMPLE_TABLES, FlowRecord, Meta, Sample1s
from perigee_control.reports import FlowPath, Relay

# Which way a flow crossed the satellite (the gateway's `path`): its own connection, or the peer path; who
# terminated the client's connection: a split flow, or the cache (Squid). The gateway's schema names them.
FLOW_PATHS: tuple[str, ...] = get_args(FlowPath.__value__)
RELAYS: tuple[str, ...] = get_args(Relay.__value__)
# Live flows of clients no configured site covers (the gateway's name for them).
OTHER_SITE = "other"
Metric = Literal[
    "class_bps",
    "action_bps",
    "cache_hit_ratio",
    "dns_hit_ratio",
    "dns_qps",
    "leg_rtt_ms",
    "link_bps",
    "link_split_bps",
    "site_down_bps",
    "site_up_bps",
    "site_saved_bps",
    "site_retrans_ps",
    "site_flows",
    "site_rtt_ms",
]
METRICS: tuple[str, ...] = get_args(Metric)
MAX_POINTS = 720


def host_of(endpoint: str) -> str:
    """'10.0.0.1:80' → '10.0.0.1'; '[fd00::1]:80' or 'fd00::1:80' → 'fd00::1'."""
    if endpoint.startswith("["):
        return endpoint[1:].split("]", 1)[0]
    if endpoint.count(":") == 1:
        return endpoint.split(":", 1)[0]
    if endpoint.count(":") > 1:
        return endpoint.rsplit(":", 1)[0]
    return endpoint


def _sat_srtt(flow: dict[str, Any]) -> int | None:
    legs = flow.get("legs") or {}
    side = legs.get("satellite")
    leg = legs.get(side) if isinstance(side, str) else None
    if isinstance(leg, dict) and isinstance(leg.get("srtt_us"), int):
        return int(leg["srtt_us"])
    return None


def satellite_bytes(flow: dict[str, Any]) -> tuple[int, int]:
    """(up, down) bytes that crossed the satellite leg: the kernel's delivered counts of the satellite-facing socket
    (at a hub it sends down to the client, at a terminal it receives down from the hub), not what the relay moved
    into it. A flow without legs keeps the relay's counts."""
    legs = flow.get("legs") or {}
    side = legs.get("satellite")
    leg = legs.get(side) if side in ("client", "server") else None
    if not isinstance(leg, dict):
        return int(flow.get("bytes_up", 0)), int(flow.get("bytes_down", 0))
    acked, received = int(leg.get("bytes_acked", 0)), int(leg.get("bytes_received", 0))
    return (received, acked) if side == "client" else (acked, received)


def store_closed_flows(db: Session, flows: list[dict[str, Any]], now: float) -> int:
    rows = []
    for f in flows:
        try:
            client, server = str(f["client"]), str(f["server"])
            up, down = satellite_bytes(f)
            rows.append(
                {
                    "gateway_id": int(f.get("id", 0)),
                    "client": client[:64],
                    "client_ip": host_of(client)[:48],
                    "server": server[:64],
                    "server_ip": host_of(server)[:48],
                    "family": int(f.get("family", 4)),
                    "flow_class": f.get("class"),
                    "action": f.get("action"),
                    "started_at": float(f.get("started_at") or now),
                    "ended_at": float(f.get("ended_at") or now),
                    "end_reason": f.get("end_reason"),
                    "bytes_up": up,
                    "bytes_down": down,
                    "sat_srtt_us": _sat_srtt(f),
                    "legs": f.get("legs"),
                    "path": f.get("path") if f.get("path") in FLOW_PATHS else None,
                    "site": str(f["site"])[:64] if f.get("site") else None,
                    "relay": f.get("relay") if f.get("relay") in RELAYS else None,
                    "dscp": f["dscp"] if isinstance(f.get("dscp"), int) and 0 <= f["dscp"] <= 63 else None,
                }
            )
        except (KeyError, TypeError, ValueError):
            continue  # a malformed record is skipped, never fatal for the batch
    if rows:
        db.execute(insert(FlowRecord), rows)
    return len(rows)


class SampleBuilder:
    """Turns consecutive gateway readings into per-second metric values (keeps the previous counters)."""

    def __init__(self) -> None:
        self.prev_counters: dict[str, Any] | None = None
        self.prev_cache: dict[str, Any] | None = None
        self.prev_dns: dict[str, Any] | None = None
        self.prev_ts: float | None = None

    def build(
        self,
        now: float,
        live: list[dict[str, Any]],
        counters: dict[str, Any] | None,
        cache: dict[str, Any] | None,
        dns: dict[str, Any] | None = None,
    ) -> list[tuple[str, str, float]]:
        out: list[tuple[str, str, float]] = []
        by_class: dict[str, float] = defaultdict(float)
        up = down = 0.0
        rtts: dict[str, list[float]] = {"satellite": [], "terrestrial": []}
        site_flows: dict[str, int] = defaultdict(int)
        site_rtts: dict[str, list[float]] = defaultdict(list)
        for f in live:
            ru, rd = float(f.get("rate_up_bps") or 0.0), float(f.get("rate_down_bps") or 0.0)
            by_class[str(f.get("class") or "unclassified")] += ru + rd
            up += ru
            down += rd
            site = str(f.get("site") or OTHER_SITE)
            site_flows[site] += 1
            legs = f.get("legs") or {}
            sat = legs.get("satellite")
            for side in ("client", "server"):
                leg = legs.get(side)
                if isinstance(leg, dict) and leg.get("srtt_us"):
                    rtt_ms = float(leg["srtt_us"]) / 1000.0
                    rtts["satellite" if side == sat else "terrestrial"].append(rtt_ms)
                    if side == sat:
                        site_rtts[site].append(rtt_ms)
        out += [("leg_rtt_ms", k, sum(v) / len(v)) for k, v in rtts.items() if v]
        out += [("site_flows", k, float(v)) for k, v in site_flows.items()]
        out += [("site_rtt_ms", k, sum(v) / len(v)) for k, v in site_rtts.items() if v]

        dt = (now - self.prev_ts) if self.prev_ts else 0.0
        split = _link_rates(counters, self.prev_counters, dt)
        link = _link_rates(counters, self.prev_counters, dt, interface=True) or split
        if split is not None:
            out += [("link_split_bps", "down", split[0]), ("link_split_bps", "up", split[1])]
        if link is not None:
            out += [("link_bps", "down", link[0]), ("link_bps", "up", link[1])]
        elif not (counters or {}).get("link"):
            # A gateway without the link counters: the live flows' rates are all there is.
            out += [("link_bps", "down", down), ("link_bps", "up", up)]
        by_class_rates = _usage_rates(counters, self.prev_counters, "by_class", dt)
        if by_class_rates is not None:
            out += [("class_bps", k, v[0] + v[1]) for k, v in by_class_rates.items()]
        elif not (counters or {}).get("by_class"):
            out += [("class_bps", k, v) for k, v in by_class.items()]
        out += self._sites(counters, dt)
        if counters and self.prev_counters and dt > 0:
            for action in ("accelerate", "cache", "bypass"):
                cur = (counters.get("by_action") or {}).get(action) or {}
                old = (self.prev_counters.get("by_action") or {}).get(action) or {}
                if action == "bypass":
                    delta = float(cur.get("bytes", 0)) - float(old.get("bytes", 0))
                else:
                    delta = float(cur.get("bytes_up", 0) + cur.get("bytes_down", 0)) - float(
                        old.get("bytes_up", 0) + old.get("bytes_down", 0)
                    )
                if delta >= 0:  # a negative delta means the gateway restarted: skip one sample
                    out.append(("action_bps", action, delta * 8 / dt))
        if cache and self.prev_cache:
            hits = _num(cache, "hits") - _num(self.prev_cache, "hits")
            reqs = _num(cache, "requests") - _num(self.prev_cache, "requests")
            if reqs <= 0 and "misses" in cache:
                reqs = hits + _num(cache, "misses") - _num(self.prev_cache, "misses")
            if reqs > 0 and hits >= 0:
                out.append(("cache_hit_ratio", "", min(1.0, hits / reqs)))
        out += self._dns(dns, dt)
        self.prev_counters, self.prev_cache, self.prev_dns, self.prev_ts = counters, cache, dns, now
        return out

    def _sites(self, counters: dict[str, Any] | None, dt: float) -> list[tuple[str, str, float]]:
        """Per-site rates from the gateway's `by_site` counters over the interval."""
        out: list[tuple[str, str, float]] = []
        rates = _usage_rates(counters, self.prev_counters, "by_site", dt)
        if rates is None or counters is None or self.prev_counters is None:
            return out
        cur, old = counters.get("by_site") or {}, self.prev_counters.get("by_site") or {}
        for site, (up, down) in rates.items():
            out += [("site_down_bps", site, down), ("site_up_bps", site, up)]
            for metric, field, scale in (
                ("site_saved_bps", "cache_saved_bytes", 8),
                ("site_retrans_ps", "retrans_segments", 1),
            ):
                d = _num(cur.get(site) or {}, field) - _num(old.get(site) or {}, field)
                if d >= 0:
                    out.append((metric, site, d * scale / dt))
        return out

    def _dns(self, dns: dict[str, Any] | None, dt: float) -> list[tuple[str, str, float]]:
        """The resolver's hit ratio and query rate over the interval (its counters are cumulative)."""
        if not dns or not self.prev_dns or dt <= 0:
            return []
        queries = _num(dns, "queries") - _num(self.prev_dns, "queries")
        hits = _num(dns, "cache_hits") - _num(self.prev_dns, "cache_hits")
        if queries < 0 or hits < 0:  # the gateway restarted: skip one sample
            return []
        out = [("dns_qps", "", queries / dt)]
        if queries > 0:
            out.append(("dns_hit_ratio", "", min(1.0, hits / queries)))
        return out


def _link_rates(
    counters: dict[str, Any] | None, prev: dict[str, Any] | None, dt: float, *, interface: bool = False
) -> tuple[float, float] | None:
    """(forward, return) bit/s over the interval from the gateway's `link` counters (the intercepted part), or with
    `interface` from its satellite interface's (the whole link); None without two readings (or when they went back:
    the gateway restarted, the interface was recreated)."""
    if not counters or not prev or dt <= 0:
        return None
    cur, old = counters.get("link"), prev.get("link")
    if interface:
        cur = cur.get("interface") if isinstance(cur, dict) else None
        old = old.get("interface") if isinstance(old, dict) else None
    if not isinstance(cur, dict) or not isinstance(old, dict):
        return None
    fwd = _num(cur, "forward_bytes") - _num(old, "forward_bytes")
    ret = _num(cur, "return_bytes") - _num(old, "return_bytes")
    if fwd < 0 or ret < 0:
        return None
    return fwd * 8 / dt, ret * 8 / dt


def _usage_rates(
    counters: dict[str, Any] | None, prev: dict[str, Any] | None, field: str, dt: float
) -> dict[str, tuple[float, float]] | None:
    """{key: (up, down) bit/s} from a `by_class`/`by_site` map of two readings; None when there is no pair."""
    if not counters or not prev or dt <= 0:
        return None
    cur, old = counters.get(field), prev.get(field)
    if not isinstance(cur, dict) or not isinstance(old, dict):
        return None
    out: dict[str, tuple[float, float]] = {}
    for key, u in cur.items():
        if not isinstance(u, dict):
            continue
        o = old.get(key) or {}
        d_up = _num(u, "bytes_up") - _num(o, "bytes_up")
        d_down = _num(u, "bytes_down") - _num(o, "bytes_down")
        if d_up >= 0 and d_down >= 0:
            out[str(key)[:64]] = (d_up * 8 / dt, d_down * 8 / dt)
    return out


def _num(d: dict[str, Any], key: str) -> float:
    v = d.get(key, 0)
    return float(v) if isinstance(v, int | float) else 0.0


def store_samples(db: Session, ts: int, values: list[tuple[str, str, float]]) -> None:
    if not values:
        return
    rows = [{"ts": ts, "metric": m, "key": k[:64], "avg": v, "max": v, "n": 1} for m, k, v in values]
    db.execute(insert(Sample1s).prefix_with("OR REPLACE"), rows)


def _get_meta(db: Session, key: str) -> int | None:
    m = db.get(Meta, key)
    return int(m.value) if m else None


def _set_meta(db: Session, key: str, value: int) -> None:
    m = db.get(Meta, key)
    if m is None:
        db.add(Meta(key=key, value=str(value)))
    else:
        m.value = str(value)


def rollup(db: Session, now: float) -> None:
    """Aggregate every complete bucket not yet rolled up: 1 s → 1 min, then 1 min → 1 h."""
    for src_res, dst_res in ((1, 60), (60, 3600)):
        src, dst = SAMPLE_TABLES[src_res].__tablename__, SAMPLE_TABLES[dst_res].__tablename__
        mark_key = f"rollup_{dst_res}"
        end = int(now) // dst_res * dst_res  # buckets before `end` are complete
        start = _get_meta(db, mark_key)
        if start is None:
            first = db.scalar(text(f"SELECT MIN(ts) FROM {src}"))
            if first is None:
                continue
            start = int(first) // dst_res * dst_res
        if start >= end:
            continue
        db.execute(
            text(
                f"INSERT OR REPLACE INTO {dst} (ts, metric, key, avg, max, n) "
                f"SELECT (ts / :res) * :res AS bucket, metric, key, SUM(avg * n) / SUM(n), MAX(max), SUM(n) "
                f"FROM {src} WHERE ts >= :start AND ts < :end GROUP BY bucket, metric, key"
            ),
            {"res": dst_res, "start": start, "end": end},
        )
        _set_meta(db, mark_key, end)


def enforce_retention(db: Session, settings: Settings, now: float) -> dict[str, int]:
    removed: dict[str, int] = {}
    for res, keep in ((1, settings.retain_1s_s), (60, settings.retain_1m_s), (3600, settings.retain_1h_s)):
        table = SAMPLE_TABLES[res]
        r = db.execute(delete(table).where(table.ts < now - keep))
        removed[table.__tablename__] = int(getattr(r, "rowcount", 0) or 0)
    r = db.execute(delete(FlowRecord).where(FlowRecord.ended_at < now - settings.retain_flows_s))
    n = int(getattr(r, "rowcount", 0) or 0)
    total = db.scalar(select(func.count()).select_from(FlowRecord)) or 0
    if total > settings.retain_flows_max_rows:
        cutoff = db.scalar(
            select(FlowRecord.id).order_by(FlowRecord.id.desc()).offset(settings.retain_flows_max_rows).limit(1)
        )
        if cutoff is not None:
            r = db.execute(delete(FlowRecord).where(FlowRecord.id <= cutoff))
            n += int(getattr(r, "rowcount", 0) or 0)
    removed["flows"] = n
    return removed


def choose_resolution(settings: Settings, start: int, end: int, now: float) -> tuple[int, int]:
    """Finest table whose retention still covers `start`, coarse enough for ≤ MAX_POINTS per key."""
    span = max(1, end - start)
    res = 3600
    for r, keep in ((1, settings.retain_1s_s), (60, settings.retain_1m_s)):
        if start >= now - keep and span / r <= MAX_POINTS * 60:
            res = r
            break
    step = max(res, math.ceil(span / MAX_POINTS / res) * res)
    return res, step


def series(
    db: Session, settings: Settings, metric: str, start: int, end: int, now: float, key: str | None = None
) -> tuple[int, int, dict[str, list[tuple[int, float, float]]]]:
    res, step = choose_resolution(settings, start, end, now)
    table = SAMPLE_TABLES[res].__tablename__
    sql = (
        f"SELECT (ts / :step) * :step AS bucket, key, SUM(avg * n) / SUM(n), MAX(max) FROM {table} "
        "WHERE metric = :metric AND ts >= :start AND ts < :end"
        + (" AND key = :key" if key is not None else "")
        + " GROUP BY bucket, key ORDER BY key, bucket"
    )
    params: dict[str, Any] = {"step": step, "metric": metric, "start": start, "end": end, "key": key}
    out: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
    for bucket, k, avg, mx in db.execute(text(sql), params):
        out[str(k)].append((int(bucket), float(avg), float(mx)))
    return res, step, dict(out)
