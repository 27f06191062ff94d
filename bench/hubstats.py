"""The `hub-scale` benchmark's arithmetic: what the simulated terminals (bench/hubsim.py) and the gateways
report, reduced to the published figures. Pure functions (bench/tests/test_hub_scale.py checks them)."""

from __future__ import annotations

from typing import Any

from satlab.cluster import bucket

FAILED_IN_FLIGHT = ("lost", "reset", "stalled", "short")


def pct(values: list[float], p: float) -> float | None:
    """The p-th percentile (nearest rank on the sorted values); None for no value."""
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))]


def setup_summary(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Every process's `setup` event -> pool connections made, failed, and the rate: connections over the wall
    time from the first process's start to the last connection ready."""
    ready = [t for e in events for t in e["ready_at"]]
    hs = [s * 1000 for e in events for s in e["handshake_s"]]
    t0 = min((float(e["t0"]) for e in events), default=0.0)
    wall = (max(ready) - t0) if ready else 0.0
    errors: dict[str, int] = {}
    for e in events:
        for k, v in e.get("errors", {}).items():
            errors[k] = errors.get(k, 0) + int(v)
    return {
        "connections": len(ready),
        "failed": sum(int(e["failed"]) for e in events),
        "wall_s": wall,
        "rate_per_s": len(ready) / wall if wall > 0 else 0.0,
        "handshake_p50_ms": pct(hs, 50),
        "handshake_p99_ms": pct(hs, 99),
        "errors": errors,
    }


def results(flows: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in flows:
        out[f["result"]] = out.get(f["result"], 0) + 1
    return out


def first_byte_summary(flows: list[dict[str, Any]]) -> dict[str, Any]:
    """Time from a flow's start (OPEN written) to the server's first byte, of the flows that completed."""
    fb = [(f["t_first"] - f["t_start"]) * 1000 for f in flows if f["result"] == "ok" and "t_first" in f]
    per_gw: dict[str, int] = {}
    for f in flows:
        if f["result"] == "ok":
            per_gw[f["gw"]] = per_gw.get(f["gw"], 0) + 1
    return {
        "flows": len(flows),
        "results": results(flows),
        "p50_ms": pct(fb, 50),
        "p99_ms": pct(fb, 99),
        "per_gateway": per_gw,
    }


def memory_summary(
    base: dict[str, dict[str, int]],
    enrolled: dict[str, dict[str, int]],
    pooled: dict[str, dict[str, int]],
    idle: dict[str, int],
    terminals: int,
    key: str = "pss_kib",
) -> dict[str, Any]:
    """Per gateway (then averaged): KiB per enrolled terminal (config only), per idle pool connection, and per
    terminal with its pool (everything added since the baseline, over the terminals)."""
    per: dict[str, dict[str, float]] = {}
    for g in base:
        conns = idle.get(g, 0)
        per[g] = {
            "config_per_terminal_kib": (enrolled[g][key] - base[g][key]) / terminals if terminals else 0.0,
            "per_connection_kib": (pooled[g][key] - enrolled[g][key]) / conns if conns else 0.0,
            "per_terminal_kib": (pooled[g][key] - base[g][key]) / terminals if terminals else 0.0,
            "connections": float(conns),
            "before_kib": float(base[g][key]),
            "after_kib": float(pooled[g][key]),
        }
    n = len(per) or 1
    avg = {
        k: sum(v[k] for v in per.values()) / n
        for k in ("config_per_terminal_kib", "per_connection_kib", "per_terminal_kib", "connections")
    }
    return {"per_gateway": per, "mean": avg}


def failover_summary(
    flows: list[dict[str, Any]],
    t_kill: float,
    victim: str,
    old_table: dict[str, Any],
    server: str,
    server_port: int,
    lost_at: dict[str, list[float]],
    table_updates: list[dict[str, Any]],
) -> dict[str, Any]:
    """What a gateway's SIGKILL cost the simulated terminals' new flows (each started at `t_start`):
    - pool_lost: the victim's pool connections that ended at the terminals after the kill;
    - in_flight_lost: flows started before the kill that failed (the victim's, cut);
    - failed_after: flows started after the kill that did not complete (aimed at the dead gateway with the old
      table: no connection, or cut); recovered_s: from the kill until new flows complete again in every bucket,
      the victim's too: the later of the last failed flow's start and the first completed one of the victim's
      old buckets;
    - moved_first_s: the first flow of one of the victim's old buckets that completed at a survivor;
    - table_s: the first new table (without the victim) a terminal held."""
    before = [f for f in flows if f["t_start"] < t_kill]
    after = [f for f in flows if f["t_start"] >= t_kill]
    bad_after = [f for f in after if f["result"] != "ok"]
    moved = [
        f["t_start"] - t_kill
        for f in after
        if f["result"] == "ok"
        and f["gw"] != victim
        and bucket.owner(old_table, f["client"], int(f["cport"]), server, server_port) == victim
    ]
    tables = [u["t"] - t_kill for u in table_updates if u["t"] >= t_kill and victim not in u.get("members", [])]
    return {
        "pool_lost": sum(1 for t in lost_at.get(victim, []) if t >= t_kill - 0.5),
        "in_flight_lost": sum(1 for f in before if f["result"] in FAILED_IN_FLIGHT),
        "flows_before": len(before),
        "flows_after": len(after),
        "failed_after": len(bad_after),
        "failed_after_results": results(bad_after),
        "recovered_s": max(max((f["t_start"] - t_kill for f in bad_after), default=0.0), min(moved, default=0.0)),
        "moved_first_s": min(moved) if moved else None,
        "moved_ok": len(moved),
        "table_s": min(tables) if tables else None,
    }


def setup_curve(events: list[dict[str, Any]], points: int = 200) -> list[tuple[float, int]]:
    """Pool connections ready against seconds since the first process started (at most `points` points)."""
    t0 = min((float(e["t0"]) for e in events), default=0.0)
    ready = sorted(t - t0 for e in events for t in e["ready_at"])
    if not ready:
        return []
    step = max(1, len(ready) // points)
    curve = [(ready[i], i + 1) for i in range(0, len(ready), step)]
    if curve[-1][1] != len(ready):
        curve.append((ready[-1], len(ready)))
    return [(0.0, 0), *curve]


def flow_series(flows: list[dict[str, Any]], t_ref: float, bin_s: float) -> dict[str, list[tuple[float, int]]]:
    """New flows per `bin_s` by their start (seconds since `t_ref`): those that completed and those that did not."""
    bins: dict[str, dict[int, int]] = {"completed": {}, "failed": {}}
    for f in flows:
        k = int((f["t_start"] - t_ref) // bin_s)
        side = bins["completed" if f["result"] == "ok" else "failed"]
        side[k] = side.get(k, 0) + 1
    keys = [k for side in bins.values() for k in side]
    if not keys:
        return {"completed": [], "failed": []}
    span = range(min(keys), max(keys) + 1)
    return {name: [(k * bin_s, side.get(k, 0)) for k in span] for name, side in bins.items()}
