"""BoD: Perigee untuned (the daemon's defaults) vs tuned from the operator's BoD
profile on satlab `geo-skyplex`: time to 90% of capacity and a page load, both."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any

from bench import bod, hybla, lab, metrics, plots, procs, records
from bench.context import Context
from bench.profiles import LinkFigures, figures
from bench.scenarios import web_pages
from bench.tools import gwconfig, lanes
from bench.transfer import Transfer, attempt, completion_record
from perigee_control.client import GatewayClient, GatewayError

NAME = "bod-tuning"
KIND = "bod"
TITLE = "BoD tuning: untuned vs tuned from the BoD profile on geo-skyplex"
DESCRIPTION = (
    "satlab `geo-skyplex` (1.144 Mbit/s, 600 ms RTT, DAMA: CRA 44 kbit/s, requests per 820 ms superframe "
    "from the input rate plus the queue's backlog, "
    "1.346 s allocation delay). Perigee at the hub (`gateway-hub`) or at hub and terminal (`gateway-both`), "
    "first `untuned`: the daemon's defaults (4 MB buffers, kernel pacing only, initcwnd 10, no route initrwnd "
    "(the whole receive space), "
    "Hybla's ρ from the measured min RTT, no cwnd ceiling), then `tuned`: the config the API derives from "
    "the link's BoD profile (api/perigee_api/tuning.py: pacing at the carrier rate, Hybla base RTT = the "
    "propagation RTT so BoD waiting does not inflate ρ, cwnd ceiling of two BDPs, initcwnd a quarter BDP, "
    "initrwnd the window that covers base RTT + the wait for the first full grant (2 superframes + the "
    "allocation delay in whole superframes), buffers two such windows), PUT over the control socket. "
    "`t90`: a download of `size_bytes` server → client (sized, not timed, so it leaves nothing queued "
    "behind for the next measurement), first time the link-feasible 1 s goodput reaches 90% of the "
    "link rate, and its `completion`; `page_load`: the Bharadwaj page (`page`) fetched by the plain HTTP client "
    "(bench/browser/http_page.py, 6 connections), beside its physical limit. Each (placement, measurement) "
    "runs on its own lab, all at once; Hybla's parameters are host-wide, so every lab runs untuned, then "
    "every lab tuned, never mixed. Each measurement starts with the RBDC grant back at 0."
)
PARAMS: dict[str, dict[str, Any]] = {
    "quick": {
        "profile": "geo-skyplex",
        "placements": ["gateway-both"],
        "size_bytes": 600_000,
        "timeout_s": 20,
        "page": "page1",
        "page_timeout_s": 25,
    },
    "full": {
        "profile": "geo-skyplex",
        "placements": ["gateway-hub", "gateway-both"],
        # Small enough that the untuned gateway finishes too (0.86 MB in 30 s measured): a flow
        # still running would share the link with the next phase.
        "size_bytes": 600_000,
        "timeout_s": 30,
        "page": "page2",
        "page_timeout_s": 40,
    },
}
GATEWAY_AT = {"gateway-hub": "hub", "gateway-both": "both"}
CONFIGS = ("untuned", "tuned")
SERVER_CC = "reno"  # the origin's socket on the short terrestrial leg
TARGET_T90_S = 6.0  # target: time to 90% of capacity on geo-skyplex under 6 s
PHASE_TIMEOUT_S = 240.0


def hybla_params(lb: lab.Lab) -> dict[str, int]:
    """The Hybla parameters in force for the hub's gateway now, as it reports them: its network
    namespace's own entry (Perigee's BPF Hybla), else the host-wide values (the kernel's)."""
    try:
        body = GatewayClient(gwconfig.socket_path(lb.prefix, "hub")).json.hybla()
    except GatewayError:
        return {}
    own = next(
        (e for e in body.get("netns") or [] if isinstance(e, dict) and e.get("cookie") == body.get("netns_cookie")),
        body,
    )
    return {k: int(own.get(k) or 0) for k in ("base_rtt_ms", "cwnd_max")}


def expected_hybla(applied: dict[str, dict[str, int]]) -> dict[str, int]:
    hub = applied.get("hub", {})
    return {
        "base_rtt_ms": hub.get("hybla.base_rtt_ms", 0),
        "cwnd_max": hub.get("hybla.cwnd_max", 0),
    }


def measure(lb: lab.Lab, kind: str, params: dict[str, Any]) -> Transfer | web_pages.Load | str:
    if kind == "transfer":
        return attempt(
            lb,
            SERVER_CC,
            int(params["size_bytes"]),
            float(params["timeout_s"]),
            sample_gateway_leg=True,
        )
    url = web_pages.page_urls(params["page"])[0]
    try:
        return web_pages.http_load(lb, url, float(params["page_timeout_s"]))
    except procs.ToolError as exc:
        return str(exc)[:300]


def lab_job(
    ctx: Context,
    params: dict[str, Any],
    placement: str,
    kind: str,
    barrier: threading.Barrier,
    prefix: str,
) -> dict[str, dict[str, Any]]:
    """One lab: untuned then tuned, in lockstep with every other lab (the barrier)."""
    where = GATEWAY_AT[placement]
    hybla.ensure()
    out: dict[str, dict[str, Any]] = {}
    try:
        with lab.running(params["profile"], gateway=where, prefix=prefix) as lb:
            for config in CONFIGS:
                applied = bod.configure(lb, where, params["profile"], tuned=config == "tuned")
                barrier.wait(PHASE_TIMEOUT_S)  # every lab runs this config before anyone measures
                bod.wait_bod_idle(lb)
                ctx.log(f"{NAME}: {prefix} {placement}/{config} {kind}")
                result = measure(lb, kind, params)
                seen = hybla_params(lb)
                barrier.wait(PHASE_TIMEOUT_S)  # nobody switches config while another still measures
                out[config] = {"applied": applied, "result": result, "hybla_seen": seen}
    except BaseException:
        barrier.abort()  # the other labs stop waiting for this one
        raise
    return out


def settings_note(applied: dict[str, dict[str, int]]) -> str:
    return "; ".join(
        f"{role}: " + ", ".join(f"{k.split('.', 1)[1]}={v}" for k, v in sorted(s.items()))
        for role, s in applied.items()
    )


def hybla_note(entry: dict[str, Any]) -> str:
    """Say so when the hub's Hybla parameters are not the ones applied (with the kernel's
    tcp_hybla they are host-wide, and another gateway on this host may have changed them)."""
    want, seen = expected_hybla(entry["applied"]), entry["hybla_seen"]
    if seen and seen != want:
        return f"; WARNING: Hybla parameters were {seen} at the end, not {want} (another gateway on this host)"
    return ""


def transfer_records(variant: str, entry: dict[str, Any], link: LinkFigures) -> list[records.Record]:
    tr = entry["result"]
    if isinstance(tr, str):
        return [records.skipped(NAME, variant, tr)]
    if not tr.cwnd:
        return [records.skipped(NAME, variant, "no intercepted socket seen at the hub")]
    note = settings_note(entry["applied"]) + hybla_note(entry)
    t90 = metrics.time_to_fraction(tr.samples, link.forward_bps, 0.9)
    out = []
    if t90 is None:
        out.append(
            records.missing(
                NAME,
                variant,
                "t90",
                "s",
                f"not reached in {tr.elapsed_s:.0f} s; {note}",
            )
        )
    else:
        verdict = "met" if t90 < TARGET_T90_S else "NOT met"
        out.append(
            records.measured(
                NAME,
                variant,
                "t90",
                t90,
                "s",
                f"target < {TARGET_T90_S:g} s: {verdict}; {note}",
            )
        )
        out.append(records.measured(NAME, variant, "t90", t90 / link.rtt_s, "RTT"))
    out.append(completion_record(NAME, variant, tr))
    return out


def page_records(variant: str, entry: dict[str, Any], link: LinkFigures, page: str) -> list[records.Record]:
    ld = entry["result"]
    if isinstance(ld, str):
        return [records.missing(NAME, variant, "page_load", "s", ld)]
    limit = web_pages.physical_limit_s(page, link.forward_bps, link.rtt_s)
    note = f"{page}, plain HTTP client, {ld.connections} connections" + hybla_note(entry)
    return [
        records.measured(NAME, variant, "page_load", ld.load_s, "s", note),
        records.measured(
            NAME,
            variant,
            "page_limit",
            limit,
            "s",
            "handshake + requests + bytes at the link rate",
        ),
        records.measured(NAME, variant, "page_vs_limit", ld.load_s / limit, "x"),
    ]


def run(ctx: Context, params: dict[str, Any]) -> list[records.Record]:
    out: list[records.Record] = []
    reason = hybla.ensure()
    if reason:
        return [records.skipped(NAME, f"{p}/{c}", reason) for p in params["placements"] for c in CONFIGS]
    link = figures(params["profile"])
    combos = [(p, kind) for p in params["placements"] for kind in ("transfer", "page")]
    barrier = threading.Barrier(len(combos))
    jobs: list[Callable[[str], dict[str, dict[str, Any]]]] = [
        partial(lab_job, ctx, params, p, kind, barrier) for p, kind in combos
    ]
    try:
        results = lanes.run_parallel(jobs, len(jobs))
    finally:
        bod.reset_hybla_params()
    series: dict[str, list[tuple[float, float]]] = {}
    t90s: dict[str, float] = {}
    for (placement, kind), res in zip(combos, results, strict=True):
        if isinstance(res, BaseException):
            for config in CONFIGS:
                out.append(
                    records.skipped(
                        NAME,
                        f"{placement}/{config}",
                        f"{kind}: {type(res).__name__}: {res}"[:300],
                    )
                )
            continue
        for config, entry in res.items():
            variant = f"{placement}/{config}"
            if kind == "transfer":
                recs = transfer_records(variant, entry, link)
                tr = entry["result"]
                if isinstance(tr, Transfer):
                    ctx.raw.setdefault(NAME, {})[variant] = tr.to_json()
                    series[variant] = bod.goodput_line(tr.samples, link.forward_bps)
            else:
                recs = page_records(variant, entry, link, params["page"])
            out += recs
            for r in recs:
                if r.metric == "t90" and r.unit == "s" and r.value is not None:
                    t90s[variant] = r.value
    for placement in params["placements"]:
        before, after = t90s.get(f"{placement}/untuned"), t90s.get(f"{placement}/tuned")
        if before and after:
            out.append(
                records.measured(
                    NAME,
                    placement,
                    "t90_speedup",
                    before / after,
                    "x",
                    "untuned t90 / tuned t90",
                )
            )
    if series:
        plots.time_series(
            ctx.plot_path(f"{NAME}-goodput"),
            f"{link.name} with BoD: Perigee untuned vs tuned from the BoD profile",
            [("goodput, 1 s [Mbit/s]", series)],
            hlines={0: (0.9 * link.forward_bps / 1e6, "90% of link rate")},
        )
    return out


def doc_extra(recs: list[records.Record]) -> str:
    by = {(r.variant, r.metric, r.unit): r.value for r in recs}
    variants = sorted({r.variant for r in recs if r.metric in ("t90", "page_load")})
    lines = ["| variant | t90 | page load | vs limit |", "|---|---|---|---|"]
    for v in variants:
        t90, page, ratio = (
            by.get((v, "t90", "s")),
            by.get((v, "page_load", "s")),
            by.get((v, "page_vs_limit", "x")),
        )
        lines.append(
            f"| {v} | {f'{t90:.1f} s' if t90 else 'n/a'} | {f'{page:.1f} s' if page else 'n/a'} | "
            f"{f'{ratio:.2f}x' if ratio else 'n/a'} |"
        )
    return f"Untuned vs tuned (target: t90 < {TARGET_T90_S:g} s):\n\n" + "\n".join(lines)
