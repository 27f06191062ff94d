"""Henderson's competing-connection experiment: a GEO download and a 20 ms download
share the hub's terrestrial bottleneck; throughput of each and Jain's fairness index."""

from __future__ import annotations

import time
from typing import Any

from bench import hybla, lab, metrics, plots, procs, records
from bench.context import Context
from bench.tools import lanes
from bench.tools.ss_parse import parse_ss, port_of

NAME = "henderson-fairness"
KIND = "fairness"
TITLE = "A GEO flow and a 20 ms flow on one terrestrial bottleneck (Henderson)"
DESCRIPTION = (
    "satlab `geo-hts` (50 Mbit/s, 600 ms RTT on the satellite). The bottleneck is the hub's terrestrial "
    "link toward the cross host (10.71.4.10, 10 ms each way), set with `satlab link set --link cross` to "
    "`bottleneck_bps` and a drop-tail queue of 100 ms at that rate, slower than the satellite. Two "
    "downloads from the cross host at once, both crossing that link: the GEO flow to the client behind "
    "the satellite (RTT 620 ms) and a persistent 20 ms-RTT flow to the server (10.71.3.10) behind the hub, "
    "started `short_lead_s` earlier as Henderson's background connection was. (The hub ↔ server veth "
    "cannot be the bottleneck: a queue there holds the sender's skbs, and TCP small queues then gives "
    "each socket an even share without a single drop, hiding the RTT unfairness under test; the "
    "emulator copies packets, like a real router.) Variants name the GEO flow's congestion control on "
    "the sender's socket; the 20 ms flow runs the same one (Henderson: both SACK NewReno), except with "
    "hybla, a satellite-only algorithm, against which it runs cubic. `gateway-hub/<cc>`: Perigee at the "
    "hub splits the GEO flow, so the sender's socket (<cc>) has the same 20 ms path as its competitor and "
    "the satellite leg is the gateway's Hybla. Throughput = bytes received in the window where both run "
    "(after `warmup_s`), averaged over `repeats` runs; Jain's index J = (Σx)²/(n·Σx²) over the two "
    "means (1 = equal shares, 0.5 = one flow takes everything); utilization = sum / bottleneck rate. "
    "Each run is checked `warmup_s` in: with the gateway the hub must hold the GEO flow's satellite-leg "
    "socket (its cc is kept in the raw results), without it it must hold none, and the sender must run "
    "the variant's cc; a variant failing that is recorded as skipped with the reason."
)
PARAMS: dict[str, dict[str, Any]] = {
    "quick": {
        "profile": "geo-hts",
        "bottleneck_bps": 10_000_000,
        "duration_s": 23,
        "warmup_s": 5,
        "short_lead_s": 1,
        "repeats": 1,
        "lanes": 2,
        "variants": [["e2e", "cubic"], ["gateway-hub", "cubic"]],
    },
    "full": {
        "profile": "geo-hts",
        "bottleneck_bps": 10_000_000,
        "duration_s": 35,
        "warmup_s": 5,
        "short_lead_s": 1,
        "repeats": 2,
        "lanes": 4,
        "variants": [
            ["e2e", "cubic"],
            ["e2e", "reno"],
            ["e2e", "hybla"],
            ["gateway-hub", "cubic"],
        ],
    },
}
GEO_PORT, SHORT_PORT = 5201, 5202
QUEUE_S = 0.1  # the bottleneck's queue, in seconds at its rate (Henderson: ~100 ms)
# Henderson, ch. 4 (Fig. 4.20 / 4.23): a single 20 ms-RTT SACK NewReno connection "drastically" reduces
# the GEO connection's throughput end to end; split at the gateway, the satellite connection "competes
# for bandwidth in the wide area and obtains its fair share". The figures are plots, not tables.
PAPER = {
    "e2e": "GEO flow drastically reduced by one 20 ms competitor (Fig. 4.20)",
    "split": "split at the gateway: GEO flow obtains its fair share (Fig. 4.23)",
}


def expected_s(params: dict[str, Any]) -> float:
    """One variant's wall time on its lab, without the lab's setup: each run plus ~3 s of
    servers starting and flows draining."""
    return int(params["repeats"]) * (float(params["duration_s"]) + float(params["short_lead_s"]) + 3.0)


def paper_finding(variant: str) -> str:
    """Henderson's result for the comparable setup (the thesis ran SACK NewReno end to end only)."""
    if variant.startswith("gateway"):
        return PAPER["split"]
    if variant.endswith("/hybla"):
        return "not in the thesis (hybla GEO flow vs a cubic 20 ms flow)"
    return PAPER["e2e"]


def short_cc(cc: str) -> str:
    return "cubic" if cc == "hybla" else cc


def window_rate_bps(samples: list[tuple[float, float]], t_from: float, t_to: float) -> float:
    """Average receive rate over [t_from, t_to] (absolute monotonic times)."""
    if t_to <= t_from:
        return 0.0
    got = metrics.cumulative_at(samples, t_to) - metrics.cumulative_at(samples, t_from)
    return got * 8 / (t_to - t_from)


def hub_leg_cc(lb: lab.Lab) -> str:
    """The congestion control of the hub's socket that sends the GEO flow over the satellite, or
    "" when the hub holds no such socket (the flow was not split). The splitter is transparent,
    so that socket's local end is the cross host's :GEO_PORT."""
    out = procs.run(lb.exec_argv("hub", ["ss", "-tinH"]), timeout=10, check=False).stdout
    for sock in parse_ss(out):
        if sock["state"] == "ESTAB" and port_of(sock["local"]) == GEO_PORT:
            return str(sock.get("cc") or "unknown")
    return ""


def pair(lb: lab.Lab, cc: str, params: dict[str, Any]) -> dict[str, Any]:
    """One run: the 20 ms flow, then the GEO flow; both end together. Absolute sample times."""
    duration, lead = float(params["duration_s"]), float(params["short_lead_s"])
    lb.flush_tcp_metrics()
    with (
        procs.Background(lab.cross_serve_argv(lb, GEO_PORT, cc, duration + lead)) as geo_srv,
        procs.Background(lab.cross_serve_argv(lb, SHORT_PORT, short_cc(cc), duration + lead)) as short_srv,
    ):
        geo_srv.wait_line("LISTENING", timeout=15)
        short_srv.wait_line("LISTENING", timeout=15)
        with procs.Background(lab.cross_fetch_argv(lb, "server", SHORT_PORT, duration + lead)) as short_fetch:
            time.sleep(lead)
            with procs.Background(lab.cross_fetch_argv(lb, "client", GEO_PORT, duration)) as geo_fetch:
                time.sleep(float(params["warmup_s"]))  # both flows up by now
                split_cc = hub_leg_cc(lb)
                geo = geo_fetch.result(timeout=duration + 30)
            short = short_fetch.result(timeout=duration + 30)
        geo_served = geo_srv.result(timeout=15) if geo.get("bytes") else {}
        short_srv.result(timeout=15)
    for name, got in (("GEO", geo), ("20 ms", short)):
        if got.get("t_start") is None or not got.get("samples"):
            raise procs.ToolError(f"{name} fetch failed: {got.get('error')}")
    return {
        "geo": geo,
        "short": short,
        "geo_cc": geo_served.get("cc", ""),
        "hub_leg_cc": split_cc,
    }


def run_variant(ctx: Context, params: dict[str, Any], mode: str, cc: str, prefix: str) -> list[dict[str, Any]]:
    gateway = "hub" if mode == "gateway-hub" else None
    if gateway:
        hybla.ensure()  # the gateway's satellite leg asks for hybla
    rate = int(params["bottleneck_bps"])
    runs = []
    with lab.running(params["profile"], gateway=gateway, prefix=prefix) as lb:
        lb.link_set(
            "--link",
            "cross",
            "--rate",
            str(rate),
            "--buffer",
            str(int(rate * QUEUE_S / 8)),
        )
        for rep in range(int(params["repeats"])):
            ctx.log(f"{NAME}: {prefix} {mode}/{cc} #{rep + 1}")
            runs.append(pair(lb, cc, params))
    return runs


def run_problem(mode: str, cc: str, runs: list[dict[str, Any]]) -> str | None:
    """Why these runs do not measure the variant they claim to (None when they do)."""
    for i, r in enumerate(runs, 1):
        if r.get("geo_cc") and r["geo_cc"] != cc:
            return f"run {i}: the GEO sender ran {r['geo_cc']}, not {cc}"
        split = bool(r.get("hub_leg_cc"))
        if mode == "gateway-hub" and not split:
            return f"run {i}: no intercepted socket at the hub: the GEO flow was not split"
        if mode == "e2e" and split:
            return f"run {i}: a socket at the hub carried the GEO flow without a gateway"
    return None


def summarize(
    variant: str, runs: list[dict[str, Any]], params: dict[str, Any]
) -> tuple[list[records.Record], dict[str, list[tuple[float, float]]]]:
    bottleneck = float(params["bottleneck_bps"])
    geo_rates, short_rates = [], []
    for r in runs:
        g, x = r["geo"], r["short"]
        t_from = g["t_start"] + float(params["warmup_s"])
        t_to = min(g["t_done"], x["t_done"])
        geo_rates.append(window_rate_bps(g["samples"], t_from, t_to))
        short_rates.append(window_rate_bps(x["samples"], t_from, t_to))
    geo, cross = sum(geo_rates) / len(runs), sum(short_rates) / len(runs)
    note = f"mean of {len(runs)} runs: " + ", ".join(f"{v / 1e6:.2f}" for v in geo_rates)
    out = [
        records.measured(NAME, variant, "geo_throughput", geo / 1e6, "Mbit/s", note),
        records.measured(NAME, variant, "short_throughput", cross / 1e6, "Mbit/s"),
        records.measured(NAME, variant, "geo_share", 100 * geo / max(geo + cross, 1.0), "%"),
        records.measured(NAME, variant, "jain_index", metrics.jain_index([geo, cross]), ""),
        records.measured(NAME, variant, "utilization", 100 * (geo + cross) / bottleneck, "%"),
    ]
    # Goodput over time of the last run, both flows on the GEO flow's clock.
    last = runs[-1]
    t0 = last["geo"]["t_start"]
    series = {}
    for key in ("geo", "short"):
        shifted = [(t - t0, b) for t, b in last[key]["samples"]]
        base = metrics.cumulative_at(shifted, 0.0)
        series[key] = [
            (t, v / 1e6)
            for t, v in metrics.goodput_series(
                [(t, b - base) for t, b in shifted if t >= 0],
                t_end=float(params["duration_s"]),
            )
        ]
    return out, series


def run(ctx: Context, params: dict[str, Any]) -> list[records.Record]:
    out: list[records.Record] = []
    jobs, names = [], []
    for mode, cc in params["variants"]:
        usable, skipped = hybla.filter_ccs([cc])
        if skipped:
            out.append(records.skipped(NAME, f"{mode}/{cc}", skipped[cc]))
            continue
        names.append((mode, usable[0]))
        jobs.append(lambda prefix, m=mode, c=usable[0]: run_variant(ctx, params, m, c, prefix))
    results = lanes.run_parallel(jobs, int(params["lanes"]))
    panels: dict[str, dict[str, list[tuple[float, float]]]] = {"geo": {}, "short": {}}
    for (mode, cc), res in zip(names, results, strict=True):
        variant = f"{mode}/{cc}"
        if isinstance(res, BaseException):
            out.append(records.skipped(NAME, variant, f"{type(res).__name__}: {res}"[:300]))
            continue
        ctx.raw.setdefault(NAME, {})[variant] = res
        problem = run_problem(mode, cc, res)
        if problem:
            out.append(records.skipped(NAME, variant, problem))
            continue
        recs, series = summarize(variant, res, params)
        out += recs
        for key, line in series.items():
            panels[key][variant] = line
    if panels["geo"]:
        plots.time_series(
            ctx.plot_path(f"{NAME}-goodput"),
            f"GEO flow vs 20 ms flow on a {params['bottleneck_bps'] / 1e6:g} Mbit/s terrestrial bottleneck",
            [
                ("GEO flow goodput, 1 s [Mbit/s]", panels["geo"]),
                ("20 ms flow goodput, 1 s [Mbit/s]", panels["short"]),
            ],
            hlines={
                0: (params["bottleneck_bps"] / 2e6, "fair share"),
                1: (params["bottleneck_bps"] / 2e6, "fair share"),
            },
        )
    return out


def doc_extra(recs: list[records.Record]) -> str:
    """Henderson's finding beside ours: the GEO flow's share and Jain's index per variant."""
    by = {(r.variant, r.metric): r.value for r in recs}
    variants = sorted({r.variant for r in recs if r.metric == "jain_index"})
    lines = [
        "| variant | Henderson (thesis ch. 4) | GEO flow | 20 ms flow | GEO share | Jain |",
        "|---|---|---|---|---|---|",
    ]
    for v in variants:
        paper = paper_finding(v)
        geo, cross = by.get((v, "geo_throughput")), by.get((v, "short_throughput"))
        share, jain = by.get((v, "geo_share")), by.get((v, "jain_index"))
        lines.append(
            f"| {v} | {paper} | {geo or 0:.2f} Mbit/s | {cross or 0:.2f} Mbit/s | {share or 0:.0f}% | {jain or 0:.3f} |"
        )
    return "Henderson's finding beside ours (fair share = 50%, Jain 1.0 = equal shares):\n\n" + "\n".join(lines)
