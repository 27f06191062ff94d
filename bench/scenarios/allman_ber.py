"""Allman et al.'s bit-error experiment: 5 MB over the ACTS/T1 link at several BERs."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from bench import hybla, lab, metrics, plots, records
from bench.context import Context
from bench.profiles import figures
from bench.tools import lanes
from bench.transfer import Transfer, attempt

NAME = "allman-ber"
KIND = "bit-errors"
TITLE = "Goodput under bit errors, ACTS/T1 (Allman et al.)"
DESCRIPTION = (
    "5 MB (quick: 2.5 MB) server → client on `geo-acts-t1` (1.536 Mbit/s, 290 ms each way) with the emulator's bit "
    "error "
    "rate set in both directions, each BER × congestion control on its own lab, `lanes` labs at once (a T1 costs "
    "little CPU). Goodput as % of optimal = (bytes delivered / time since connect()) ÷ "
    "(size / physical limit), the limit being 2 RTT + size/rate for a download. A transfer that has not "
    "finished within the time cap is scored on the bytes it delivered by then (noted in the table). "
    "`perigee`: Perigee at the hub (`--gateway hub`) splits the flow; the server's socket runs cubic on "
    "the short terrestrial leg and the gateway runs Hybla over the lossy satellite hop (its cwnd is "
    "sampled at the hub, so a flow that was not split is reported as skipped, never as a number)."
)
PARAMS: dict[str, dict[str, Any]] = {
    "quick": {
        "profile": "geo-acts-t1",
        # 2.5 MB so that hybla and Perigee finish within the quick budget (5 MB needs > 30 s at 1e-6).
        "size_bytes": 2_500_000,
        "bers": [1e-6],
        "ccs": ["reno", "cubic", "hybla"],
        "cap_s": 20,
        "perigee": {"gateway": "hub", "cc": "cubic"},
        "lanes": 4,
    },
    "full": {
        "profile": "geo-acts-t1",
        "size_bytes": 5_000_000,
        "bers": [0, 1e-7, 1e-6, 1e-5],
        "ccs": ["reno", "cubic", "hybla"],
        # Lossy reno/cubic reach their steady rate well within 90 s; the paper's BERs where they
        # finish (0, 1e-7) complete in ~30 s.
        "cap_s": 90,
        "perigee": {"gateway": "hub", "cc": "cubic"},
        "lanes": 6,
    },
}
# Allman et al., "TCP Performance over Satellite Links", bit-error experiments (5 MB over the T1 emulator),
# goodput as a percentage of optimal.
PAPER = {
    ("reno", 1e-7): 22.0,
    ("sack", 1e-7): 41.0,
    ("reno", 1e-6): 4.0,
    ("sack", 1e-6): 9.0,
}


def ber_label(ber: float) -> str:
    return "0" if ber == 0 else f"{ber:.0e}".replace("e-0", "e-")


PERIGEE = "perigee"  # the variant name of the split flow (server cc → gateway Hybla)


def expected_s(job: tuple[float, str], params: dict[str, Any]) -> float:
    """Rough wall time of one transfer, to start the longest first: lossy reno/cubic hit the cap."""
    ber, name = job
    link = figures(params["profile"])
    wire = int(params["size_bytes"]) * 8 / link.forward_bps
    slow = ber >= 1e-6 and name not in ("hybla", PERIGEE)
    return float(params["cap_s"]) if slow else min(float(params["cap_s"]), wire * (1 + ber * 1e6))


def one_transfer(ctx: Context, params: dict[str, Any], ber: float, name: str, prefix: str) -> Transfer | str:
    """One BER × variant on its own lab (T1 costs little CPU, so several run at once)."""
    gateway = params["perigee"]["gateway"] if name == PERIGEE else None
    cc = params["perigee"]["cc"] if name == PERIGEE else name
    with lab.running(
        params["profile"],
        gateway=gateway,
        overrides=["--ber", repr(float(ber))],
        prefix=prefix,
    ) as lb:
        ctx.log(f"{NAME}: {prefix} ber={ber_label(ber)}/{name}")
        tr = attempt(
            lb,
            cc,
            int(params["size_bytes"]),
            float(params["cap_s"]),
            sample_gateway_leg=gateway is not None,
        )
    if gateway and not isinstance(tr, str) and not tr.cwnd:
        return f"no intercepted socket seen at the {gateway}: the flow was not split"
    return tr


def variant_names(params: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The variants that can run (e2e ccs, then Perigee) and a skip reason for the others."""
    names, skipped = hybla.filter_ccs(list(params["ccs"]))
    if "perigee" in params:
        reason = hybla.ensure()  # the gateway's satellite leg runs Hybla
        if reason:
            skipped[PERIGEE] = reason
        else:
            names.append(PERIGEE)
    return names, skipped


def run(ctx: Context, params: dict[str, Any]) -> list[records.Record]:
    out: list[records.Record] = []
    link = figures(params["profile"])
    size, cap = int(params["size_bytes"]), float(params["cap_s"])
    names, skipped = variant_names(params)
    limit = metrics.physical_limit_s(size, link.forward_bps, link.rtt_s, 1.5)
    optimal_bps = size * 8 / limit
    bers = [float(b) for b in params["bers"]]
    specs = lanes.longest_first([(ber, n) for ber in bers for n in names], lambda j: expected_s(j, params))
    jobs: list[Callable[[str], Transfer | str]] = [partial(one_transfer, ctx, params, ber, n) for ber, n in specs]
    done = dict(zip(specs, lanes.run_parallel(jobs, int(params["lanes"])), strict=True))
    bars: dict[str, list[float | None]] = {n: [] for n in names}
    for ber in bers:
        for n, reason in skipped.items():
            out.append(records.skipped(NAME, f"ber={ber_label(ber)}/{n}", reason))
        for n in names:
            variant = f"ber={ber_label(ber)}/{n}"
            tr = done[(ber, n)]
            if isinstance(tr, BaseException):
                tr = f"lab failed: {tr}"[:300]
            if isinstance(tr, str):
                out.append(records.skipped(NAME, variant, tr))
                bars[n].append(None)
                continue
            ctx.raw.setdefault(NAME, {})[variant] = tr.to_json()
            pct = 100.0 * tr.goodput_bps() / optimal_bps
            note = "" if tr.completed else f"{tr.bytes_received / 1e6:.2f} of {size / 1e6:g} MB in {cap:.0f} s cap"
            out.append(records.measured(NAME, variant, "goodput_pct_optimal", pct, "%", note))
            out.append(records.measured(NAME, variant, "goodput", tr.goodput_bps() / 1e3, "kbit/s"))
            if tr.retransmits is not None:
                out.append(records.measured(NAME, variant, "retransmits", tr.retransmits, "segments"))
            bars[n].append(pct)
    # The paper's SACK numbers (1997, ACTS/T1) as their own bars where it reports that BER.
    bars["Allman et al. SACK (paper)"] = [PAPER.get(("sack", b)) for b in bers]
    plots.grouped_bars(
        ctx.plot_path(f"{NAME}-goodput"),
        f"{size / 1e6:g} MB on {link.name}: goodput vs bit error rate",
        "goodput [% of optimal]",
        [ber_label(b) for b in bers],
        bars,
    )
    return out


TARGET_PCT, TARGET_BER = 80.0, 1e-6  # target: at BER 1e-6 on T1 GEO, ≥ 80% of optimal


def doc_extra(recs: list[records.Record]) -> str:
    """The paper's numbers beside ours, and the published target through Perigee."""
    ours = {r.variant: r.value for r in recs if r.metric == "goodput_pct_optimal"}
    lines = [
        "| BER | Allman Reno | Allman SACK | ours reno | ours cubic | ours hybla | Perigee (hub) |",
        "|---|---|---|---|---|---|---|",
    ]
    for ber in (0.0, 1e-7, 1e-6, 1e-5):
        cells = [ber_label(ber)]
        for paper_cc in ("reno", "sack"):
            value = PAPER.get((paper_cc, ber))
            cells.append("–" if value is None else f"{value:g}%")
        for n in ("reno", "cubic", "hybla", PERIGEE):
            value = ours.get(f"ber={ber_label(ber)}/{n}")
            cells.append("not run" if value is None else f"{value:.1f}%")
        lines.append("| " + " | ".join(cells) + " |")
    got = ours.get(f"ber={ber_label(TARGET_BER)}/{PERIGEE}")
    verdict = "not measured in this run" if got is None else f"{got:.1f}%: {'met' if got >= TARGET_PCT else 'NOT met'}"
    return (
        "Paper vs ours (goodput % of optimal; Linux reno/cubic always use SACK, so they compare to "
        "the paper's SACK column; – = the paper does not report that BER). Target: at BER "
        f"{ber_label(TARGET_BER)} through Perigee ≥ {TARGET_PCT:g}% of optimal: {verdict}.\n\n" + "\n".join(lines)
    )
