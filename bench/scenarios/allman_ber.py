"""Issue 9 §2: Allman et al.'s bit-error experiment: 5 MB over the ACTS/T1 link at several BERs."""

from __future__ import annotations

from typing import Any

from bench import hybla, lab, metrics, plots, records
from bench.context import Context
from bench.profiles import figures
from bench.transfer import attempt

NAME = "allman-ber"
KIND = "bit-errors"
TITLE = "Goodput under bit errors, ACTS/T1 (issue 9 §2, Allman et al.)"
DESCRIPTION = (
    "5 MB server → client on `geo-acts-t1` (1.536 Mbit/s, 290 ms each way) with the emulator's bit error "
    "rate set in both directions. Goodput as % of optimal = (bytes delivered / time since connect()) ÷ "
    "(size / physical limit), the limit being 2 RTT + size/rate for a download. A transfer that has not "
    "finished within the time cap is scored on the bytes it delivered by then (noted in the table)."
)
PARAMS: dict[str, dict[str, Any]] = {
    "quick": {
        "profile": "geo-acts-t1",
        "size_bytes": 5_000_000,
        "bers": [1e-6],
        "ccs": ["reno", "cubic", "hybla"],
        "cap_s": 30,
    },
    "full": {
        "profile": "geo-acts-t1",
        "size_bytes": 5_000_000,
        "bers": [0, 1e-7, 1e-6, 1e-5],
        "ccs": ["reno", "cubic", "hybla"],
        "cap_s": 150,
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


def run(ctx: Context, params: dict[str, Any]) -> list[records.Record]:
    out: list[records.Record] = []
    link = figures(params["profile"])
    size, cap = int(params["size_bytes"]), float(params["cap_s"])
    ccs, skipped = hybla.filter_ccs(list(params["ccs"]))
    limit = metrics.physical_limit_s(size, link.forward_bps, link.rtt_s, 1.5)
    optimal_bps = size * 8 / limit
    bars: dict[str, list[float | None]] = {cc: [] for cc in ccs}
    for ber in params["bers"]:
        for cc, reason in skipped.items():
            out.append(records.skipped(NAME, f"ber={ber_label(ber)}/{cc}", reason))
        with lab.running(
            params["profile"], overrides=["--ber", repr(float(ber))]
        ) as lb:
            for cc in ccs:
                variant = f"ber={ber_label(ber)}/{cc}"
                ctx.log(f"{NAME}: {variant}")
                tr = attempt(lb, cc, size, cap)
                if isinstance(tr, str):
                    out.append(records.skipped(NAME, variant, tr))
                    bars[cc].append(None)
                    continue
                ctx.raw.setdefault(NAME, {})[variant] = tr.to_json()
                pct = 100.0 * tr.goodput_bps() / optimal_bps
                note = (
                    ""
                    if tr.completed
                    else f"{tr.bytes_received / 1e6:.2f} of {size / 1e6:g} MB in {cap:.0f} s cap"
                )
                out.append(
                    records.measured(
                        NAME, variant, "goodput_pct_optimal", pct, "%", note
                    )
                )
                out.append(
                    records.measured(
                        NAME, variant, "goodput", tr.goodput_bps() / 1e3, "kbit/s"
                    )
                )
                if tr.retransmits is not None:
                    out.append(
                        records.measured(
                            NAME, variant, "retransmits", tr.retransmits, "segments"
                        )
                    )
                bars[cc].append(pct)
    # The paper's SACK numbers (1997, ACTS/T1) as their own bars where it reports that BER.
    bars["Allman et al. SACK (paper)"] = [
        PAPER.get(("sack", float(b))) for b in params["bers"]
    ]
    plots.grouped_bars(
        ctx.plot_path(f"{NAME}-goodput"),
        f"5 MB on {link.name}: goodput vs bit error rate",
        "goodput [% of optimal]",
        [ber_label(b) for b in params["bers"]],
        bars,
    )
    return out


def doc_extra(recs: list[records.Record]) -> str:
    """The paper's numbers beside ours at the BERs it reports."""
    ours = {r.variant: r.value for r in recs if r.metric == "goodput_pct_optimal"}
    lines = [
        "| BER | Allman Reno | Allman SACK | ours reno | ours cubic | ours hybla |",
        "|---|---|---|---|---|---|",
    ]
    for ber in (1e-7, 1e-6):
        cells = [
            ber_label(ber),
            f"{PAPER[('reno', ber)]:g}%",
            f"{PAPER[('sack', ber)]:g}%",
        ]
        for cc in ("reno", "cubic", "hybla"):
            value = ours.get(f"ber={ber_label(ber)}/{cc}")
            cells.append("not run" if value is None else f"{value:.1f}%")
        lines.append("| " + " | ".join(cells) + " |")
    return (
        "Paper vs ours (goodput % of optimal; Linux reno/cubic always use SACK, so they compare to "
        "the paper's SACK column):\n\n" + "\n".join(lines)
    )
