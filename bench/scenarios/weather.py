"""Weather: bulk downloads while the link changes under them (a rain fade on geo-hts, a LEO pass), Perigee
at both ends with the appliance's defaults against end to end, every figure against the capacity the
link's schedule actually offered."""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Any

from bench import hybla, lab, metrics, plots, records
from bench.context import Context
from bench.profiles import LinkFigures, figures
from bench.tools import gwconfig, lanes
from bench.transfer import Transfer, attempt, limit_records

NAME = "weather"
KIND = "weather"
TITLE = "Weather: a rain fade and a LEO pass under a bulk download, Perigee's defaults vs end to end"
DESCRIPTION = (
    "A download server → client while a satlab link schedule (docs/lab.md, *Link schedules*) changes the "
    "link under it. `rain-fade` on `geo-hts`: 10 s after the schedule starts the forward link drops to 40% of "
    "its rate (DVB-S2 adaptive coding) with BER 1e-6 for 20 s, then clear sky. `leo-pass` on `leo`: every "
    "15 s a path change steps the RTT (30, 44, 24, 38 ms) with 300 ms at 75% loss in both directions. "
    "`both/default`: Perigee at both ends (`satlab up --gateway both`) with no setting changed; `both/<cc>`: the "
    "same with `satellite.congestion_control` set to `<cc>` on both gateways (`both/hybla`: the former default); "
    "`e2e/<cc>`: no gateway, `<cc>` on the server's socket. The two labs are up side by side and take "
    "turns, each transfer starting 1 s into a fresh run of the schedule, so every variant meets the same "
    "weather at the same point of its transfer. `limit`: the physical limit against the schedule's own "
    "capacity: 1.5 RTT + the time the schedule's rates need to carry the bytes (the rate integrated over "
    "the schedule from the request's arrival) + ½ RTT; `vs_limit` = completion / limit. cwnd: the "
    "satellite-leg sender's (the hub's socket through Perigee, the server's end to end), every 100 ms."
)
VARIANTS = ("both/default", "both/hybla", "e2e/bbr", "e2e/cubic")
HEADLINE = "both/default"
START_AFTER_S = 1.0  # the transfer starts this long after the schedule
DOWNLOAD_RTTS_BEFORE_DATA = 1.5
SERVER_CC = "cubic"  # the terrestrial leg's sender behind a gateway
# Targets: rain fade <= 1.1x its limit and faster than end to end; LEO never slower than end to end.
TARGET_FADE_X = 1.1
PARAMS: dict[str, dict[str, Any]] = {
    "quick": {
        "cases": [{"schedule": "leo-pass", "profile": "leo", "size": 100_000_000, "cap_s": 40}],
        "variants": ["both/default", "e2e/bbr"],
        "repeats": 1,
    },
    "full": {
        "cases": [
            {"schedule": "rain-fade", "profile": "geo-hts", "size": 200_000_000, "cap_s": 120},
            {"schedule": "leo-pass", "profile": "leo", "size": 300_000_000, "cap_s": 90},
        ],
        "variants": list(VARIANTS),
        "repeats": 2,
    },
}


def satellite_cc(variant: str) -> str | None:
    """`both/<cc>`: that satellite-leg congestion control set in both gateways' config; `both/default`: none."""
    cc = variant.split("/", 1)[1]
    return None if variant.startswith("e2e/") or cc == "default" else cc


def configure(lb: lab.Lab, originals: dict[str, dict[str, Any]], cc: str | None) -> None:
    """Both gateways as satlab started them, or with `cc` as their satellite congestion control."""
    for role, cfg in originals.items():
        new = dict(cfg, revision=f"bench-weather-{cc or 'default'}")
        if cc:
            new["satellite"] = dict(cfg["satellite"], congestion_control=cc)
        gwconfig.put_config(gwconfig.socket_path(lb.prefix, role), new)


def sender_cc(variant: str) -> str:
    return variant.split("/", 1)[1] if variant.startswith("e2e/") else SERVER_CC


def run_schedule(lb: lab.Lab, name: str) -> tuple[float, dict[str, Any]]:
    """Start schedule `name` on the lab's satellite link; (its CLOCK_MONOTONIC start, its resolved form)."""
    from satlab import linkctl, weather
    from satlab.topology import SAT_LINK, Topology

    sock = Topology(prefix=lb.prefix).path(f"{SAT_LINK.name}-link.sock")
    params = linkctl.get(sock)
    reverse = "a_to_b" if SAT_LINK.forward == "b_to_a" else "b_to_a"
    resolved = weather.resolve(weather.load(name), params[SAT_LINK.forward], params[reverse])
    request = weather.emulator_request(resolved, SAT_LINK.forward)
    t0 = time.monotonic()
    linkctl.schedule(sock, request)
    return t0, resolved


def clear_weather(lb: lab.Lab, base: dict[str, Any]) -> None:
    """Stop the schedule and put the link back as the profile has it."""
    from satlab import linkctl
    from satlab.topology import SAT_LINK, Topology

    sock = Topology(prefix=lb.prefix).path(f"{SAT_LINK.name}-link.sock")
    linkctl.schedule(sock, {"cmd": "schedule", "steps": []})
    reverse = "a_to_b" if SAT_LINK.forward == "b_to_a" else "b_to_a"
    linkctl.set_params(sock, SAT_LINK.forward, base["forward"])
    linkctl.set_params(sock, reverse, base["return"])


def base_params(lb: lab.Lab) -> dict[str, Any]:
    from satlab import linkctl
    from satlab.topology import SAT_LINK, Topology

    sock = Topology(prefix=lb.prefix).path(f"{SAT_LINK.name}-link.sock")
    params = linkctl.get(sock)
    reverse = "a_to_b" if SAT_LINK.forward == "b_to_a" else "b_to_a"
    return {"forward": params[SAT_LINK.forward], "return": params[reverse]}


class Run:
    """One transfer under the weather: the transfer, where it started in the schedule, the schedule."""

    def __init__(self, tr: Transfer, offset_s: float, resolved: dict[str, Any]) -> None:
        self.tr, self.offset_s, self.resolved = tr, offset_s, resolved


def limit_s(run: Run, link: LinkFigures) -> float:
    """1.5 RTT + the schedule's time to carry the bytes from the request's arrival + ½ RTT."""
    from satlab import weather

    rtt = link.rtt_s
    first = run.offset_s + DOWNLOAD_RTTS_BEFORE_DATA * rtt
    timeline = weather.rate_timeline(run.resolved, link.forward_bps, first + 3600)
    carry = weather.delivery_time_s(timeline, first, run.tr.size_bytes * 8)
    return DOWNLOAD_RTTS_BEFORE_DATA * rtt + carry + rtt / 2


def run_case(ctx: Context, case: dict[str, Any], variants: list[str], repeats: int) -> dict[str, list[Run | str]]:
    """Both labs up at once; the variants take turns, each on a fresh run of the schedule."""
    out: dict[str, list[Run | str]] = {v: [] for v in variants}
    need_gateway = any(not v.startswith("e2e/") for v in variants)
    if need_gateway:
        hybla.ensure("hybla")
        hybla.ensure("hybla_ld")
    gw_prefix, e2e_prefix = lanes.lane_prefixes(2)
    with ExitStack() as stack:
        labs = {
            "gateway": stack.enter_context(lab.running(case["profile"], gateway="both", prefix=gw_prefix))
            if need_gateway
            else None,
            "e2e": stack.enter_context(lab.running(case["profile"], prefix=e2e_prefix))
            if any(v.startswith("e2e/") for v in variants)
            else None,
        }
        bases = {k: base_params(lb) for k, lb in labs.items() if lb is not None}
        gw = labs["gateway"]
        originals = (
            {role: gwconfig.get_config(gwconfig.socket_path(gw.prefix, role)) for role in ("hub", "terminal")}
            if gw is not None
            else {}
        )
        for rep in range(repeats):
            for v in variants:
                kind = "e2e" if v.startswith("e2e/") else "gateway"
                lb = labs[kind]
                assert lb is not None
                if kind == "gateway":
                    configure(lb, originals, satellite_cc(v))
                ctx.log(f"{NAME}: {case['schedule']} {v} run {rep + 1}/{repeats}")
                t_sched, resolved = run_schedule(lb, case["schedule"])
                time.sleep(START_AFTER_S)
                tr = attempt(
                    lb, sender_cc(v), int(case["size"]), float(case["cap_s"]), sample_gateway_leg=kind == "gateway"
                )
                clear_weather(lb, bases[kind])
                if isinstance(tr, str):
                    out[v].append(tr)
                else:
                    out[v].append(Run(tr, tr.t_start - t_sched, resolved))
                time.sleep(2.0)  # the queue drains and the path settles before the next turn
    return out


def key(case: dict[str, Any], variant: str, rep: int | None = None) -> str:
    base = f"{case['schedule']}/{case['size'] / 1e6:g}MB/{variant}"
    return base if rep is None else f"{base}/run{rep + 1}"


def run_records(k: str, run: Run, link: LinkFigures, cap: float) -> list[records.Record]:
    return limit_records(NAME, k, run.tr, limit_s(run, link), cap)


def run(ctx: Context, params: dict[str, Any]) -> list[records.Record]:
    out: list[records.Record] = []
    variants = list(params["variants"])
    usable = []
    for v in variants:
        _, skipped = hybla.filter_ccs([cc for cc in (satellite_cc(v), sender_cc(v)) if cc])
        if skipped:
            for case in params["cases"]:
                out.append(records.skipped(NAME, key(case, v), next(iter(skipped.values()))))
        else:
            usable.append(v)
    for case in params["cases"]:
        link = figures(case["profile"])
        try:
            results = run_case(ctx, case, usable, int(params["repeats"]))
        except lab.LabUnavailable as exc:
            out += [records.skipped(NAME, key(case, v), str(exc)[:300]) for v in usable]
            continue
        good: dict[str, list[Run]] = {}
        for v, runs in results.items():
            for rep, r in enumerate(runs):
                k = key(case, v, rep)
                if isinstance(r, str):
                    out.append(records.skipped(NAME, k, r))
                    continue
                if not v.startswith("e2e/") and not r.tr.cwnd:
                    out.append(records.skipped(NAME, k, "no intercepted socket seen at the hub: not split"))
                    continue
                ctx.raw.setdefault(NAME, {})[k] = {**r.tr.to_json(), "schedule_offset_s": r.offset_s}
                out += run_records(k, r, link, float(case["cap_s"]))
                good.setdefault(v, []).append(r)
        plot(ctx, case, good, link)
    return out


def schedule_overlay(run: Run, link: LinkFigures, t_end: float) -> tuple[list[tuple[float, float]], list[Any]]:
    """The schedule on the transfer's time axis: the forward rate as a step line (Mbit/s) and the
    spans with loss (shaded)."""
    from satlab import weather

    off = run.offset_s
    timeline = weather.rate_timeline(run.resolved, link.forward_bps, off + t_end)
    line: list[tuple[float, float]] = []
    for i, (t, r) in enumerate(timeline):
        t_next = timeline[i + 1][0] if i + 1 < len(timeline) else off + t_end
        line += [(max(0.0, t - off), r / 1e6), (max(0.0, t_next - off), r / 1e6)]
    spans = []
    lossy_since: float | None = None
    period = (run.resolved["repeat_ms"] or 0) / 1000
    fwd = [s for s in run.resolved["steps"] if s["dir"] == "forward"]
    cycle = 0
    while True:
        for s in fwd:
            t = cycle * period + s["at_ms"] / 1000 - off
            lossy = any(float(s["params"].get(f, 0) or 0) > 0 for f in ("ber", "per")) or bool(
                s["params"].get("gilbert")
            )
            touches = any(f in s["params"] for f in ("ber", "per", "gilbert"))
            if touches and lossy and lossy_since is None:
                lossy_since = t
            elif touches and not lossy and lossy_since is not None:
                if t > 0:
                    spans.append((max(0.0, lossy_since), t, "loss on the link"))
                lossy_since = None
        cycle += 1
        if not period or cycle * period - off > t_end:
            break
    return line, [(a, min(b, t_end), text) for a, b, text in spans if a < t_end]


def plot(ctx: Context, case: dict[str, Any], good: dict[str, list[Run]], link: LinkFigures) -> None:
    firsts = {v: runs[0] for v, runs in good.items() if runs}
    if not firsts:
        return
    t_end = max(r.tr.elapsed_s for r in firsts.values())
    ref = next(iter(firsts.values()))
    rate_line, spans = schedule_overlay(ref, link, t_end)
    goodput = {
        v: [(t, g / 1e6) for t, g in metrics.goodput_series(metrics.link_progress(r.tr.samples, link.forward_bps))]
        for v, r in firsts.items()
    }
    goodput["link rate (schedule)"] = rate_line
    plots.time_series(
        ctx.plot_path(f"{NAME}-{case['schedule']}"),
        f"{case['schedule']} on {link.name}, {case['size'] / 1e6:g} MB: goodput and satellite-leg cwnd",
        [
            ("goodput, 1 s [Mbit/s]", goodput),
            ("cwnd [segments]", {v: r.tr.cwnd for v, r in firsts.items()}),
        ],
        spans=spans,
    )


def verdicts(recs: dict[tuple[str, str], records.Record]) -> list[str]:
    """The targets, on this run's records: each Perigee run against the end-to-end runs of the same case."""
    out = []
    cases = sorted({"/".join(k.split("/")[:2]) for (k, m) in recs if m == "limit"})
    for case in cases:
        mine = [r for (k, m), r in recs.items() if k.startswith(f"{case}/{HEADLINE}/") and m == "completion"]
        e2e = [r for (k, m), r in recs.items() if k.startswith(f"{case}/e2e/") and m == "completion"]
        done = [r.value for r in mine if r.value is not None]
        fastest_e2e = min((r.value for r in e2e if r.value is not None), default=None)
        xs = [r.value for (k, m), r in recs.items() if k.startswith(f"{case}/{HEADLINE}/") and m == "vs_limit"]
        if not done:
            out.append(f"{case}: Perigee did not finish in the cap.")
            continue
        text = f"{case}: Perigee (defaults) {', '.join(f'{d:.1f}' for d in done)} s"
        if xs and all(x is not None for x in xs):
            text += f" = {', '.join(f'{x:.2f}' for x in xs if x is not None)}x the schedule's limit"
        if fastest_e2e is not None:
            slower = max(done) > fastest_e2e
            text += f"; fastest end to end {fastest_e2e:.1f} s: {'SLOWER' if slower else 'never slower'}"
        if case.startswith("rain-fade") and xs:
            ok = all(x is not None and x <= TARGET_FADE_X for x in xs)
            text += f"; target <= {TARGET_FADE_X:g}x: {'met' if ok else 'NOT met'}"
        out.append(text + ".")
    return out


def doc_extra(recs_list: list[records.Record]) -> str:
    recs = {(r.variant, r.metric): r for r in recs_list}
    checks = verdicts(recs)
    return "\n".join(f"- {c}" for c in checks)
