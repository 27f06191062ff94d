"""Bharadwaj et al.'s sweep: file size × link rate × BER over a 250 ms-each-way link,
end to end vs split at Perigee gateways."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from bench import hybla, lab, metrics, plots, records
from bench.context import Context
from bench.tools import lanes
from bench.transfer import Transfer, attempt

NAME = "bharadwaj-sweep"
KIND = "transfer"
TITLE = "File size × link rate × BER, end to end vs split (Bharadwaj et al.)"
DESCRIPTION = (
    "One download server → client per cell on satlab (`geo-acts-t1` with `--rtt 500` and both directions "
    "set to the cell's rate; queue = max(128 KiB, 1 BDP); BER on both directions). `e2e`: no gateway, "
    "the server's socket runs cubic. `split`: Perigee at hub and terminal (`--gateway both`, the paper's "
    "two gateways G1/G2 around the satellite hop), the server's socket runs cubic on the short "
    "terrestrial leg and the gateways run Hybla over the satellite. Throughput = size × 8 / time from "
    "connect() to the last byte; `efficiency` = physical limit (2 RTT + size/rate) / that time. The full "
    "grid is 5 sizes × 3 rates × 3 BERs × 2 modes, and every cell runs, but 100 MB at 384 kbit/s alone is "
    "35 min on the wire: each transfer is capped at `cap_s`, or 1.25 × its wire time + 3 RTT if longer, "
    "and never more than `max_transfer_s` (full: 75 s, so 10 MB at 384 kbit/s and 100 MB at every rate "
    "are cut, marked * in the tables). A transfer still running at its cap is scored on the bytes it "
    "delivered (noted: throughput and link use over the cap), which for a file many times the BDP is its "
    "steady rate after slow start: a lossy end-to-end flow's loss-limited rate shows well before it "
    "would finish. "
    "Labs run `lanes` at a time (these rates cost little CPU), one per rate × BER × mode."
)
KB, MB = 1000, 1000_000
PARAMS: dict[str, dict[str, Any]] = {
    "quick": {
        "rtt_ms": 500,
        "rates_bps": [1_536_000],
        "sizes": [10 * KB, 100 * KB, 1 * MB],
        "bers": [0],
        "modes": ["e2e", "split"],
        "max_transfer_s": 40,
        "cap_s": 40,
        "lanes": 2,
    },
    "full": {
        "rtt_ms": 500,
        "rates_bps": [384_000, 1_536_000, 8_000_000],
        "sizes": [10 * KB, 100 * KB, 1 * MB, 10 * MB, 100 * MB],
        "bers": [0, 1e-7, 1e-6],
        "modes": ["e2e", "split"],
        "max_transfer_s": 75,
        "cap_s": 45,
        "lanes": 9,
    },
}
E2E_CC = "cubic"
GATEWAY = "both"
MIN_BUFFER = 128 * 1024  # geo-acts-t1's queue: "above the delay-bandwidth product" (Allman et al.)
RTTS_BEFORE_DATA = 1.5  # handshake + the request's one-way trip
# Bharadwaj et al. sec. 4 (Figs. 4-9 are plots; the text gives the shape): end to end (NT/Win95 stacks,
# 8 KB window) is window-limited to ~128 kbit/s whatever the link rate; split is near the link rate for
# files ≫ BDP, held back by slow start for small files; with BER 1e-6 split drops considerably at
# 1.536 Mbit/s, and below 50% at 8 Mbit/s from 1e-7.
PAPER_E2E_CEILING_BPS = 8 * 1024 * 8 / 0.5
PAPER_SHAPE = (
    "end to end: flat at the window limit (8 KB / 500 ms ≈ 128 kbit/s) for every rate, so efficiency "
    "falls as the rate grows; split: close to the link rate once the file is ≫ 1 BDP, slow start limits "
    "small files; BER 1e-6 hurts split considerably at 1.536 Mbit/s, and at 8 Mbit/s it is below 50% "
    "from 1e-7 (10 MB file)"
)


def size_label(size: int) -> str:
    return f"{size // MB}MB" if size >= MB else f"{size // KB}KB"


def rate_label(rate: int) -> str:
    return f"{rate / 1e6:g}M" if rate >= 1_000_000 else f"{rate / 1e3:g}k"


def ber_label(ber: float) -> str:
    return "0" if ber == 0 else f"{ber:.0e}".replace("e-0", "e-")


def variant(rate: int, size: int, ber: float, mode: str) -> str:
    return f"{rate_label(rate)}/{size_label(size)}/ber={ber_label(ber)}/{mode}"


def lab_overrides(rate: int, rtt_ms: float, ber: float) -> list[str]:
    bdp = int(rate * rtt_ms / 1000 / 8)
    return [
        "--rtt", f"{rtt_ms:g}",
        "--fwd-rate", str(rate),
        "--ret-rate", str(rate),
        "--buffer", str(max(MIN_BUFFER, bdp)),
        "--ber", repr(float(ber)),
    ]  # fmt: skip


def loss_ceiling_bps(rtt_s: float, ber: float) -> float:
    """Mathis et al.'s loss-limited rate for a Reno-like sender (MSS × 1.22 / (RTT √p)), p being
    the chance that a 1500-byte packet is hit: what a lossy end-to-end flow can expect."""
    p = 1 - (1 - ber) ** (1500 * 8)
    return float("inf") if p <= 0 else 1448 * 8 * 1.22 / (rtt_s * p**0.5)


def cap_for(size: int, rate: int, params: dict[str, Any]) -> float:
    """The time allowed one transfer: `cap_s`, or more for a big file that needs it on the wire,
    but at most `max_transfer_s` (beyond it a file is scored on what it delivered in that time)."""
    rtt = float(params["rtt_ms"]) / 1000
    wanted = max(float(params["cap_s"]), 1.25 * size * 8 / rate + 3 * rtt)
    return min(wanted, float(params["max_transfer_s"]))


def expected_s(job: tuple[int, float, str], params: dict[str, Any]) -> float:
    """Rough wall time of one lab's transfers (to start the longest first, and the budget test):
    serialization plus slow start, at the loss-limited rate for a lossy end-to-end flow, within
    each transfer's cap, plus ~1.5 s per transfer for its server and client to start."""
    rate, ber, mode = job
    sizes = [int(x) for x in params["sizes"]]
    rtt = float(params["rtt_ms"]) / 1000
    speed = rate if mode == "split" else min(rate, loss_ceiling_bps(rtt, ber))
    return sum(min(cap_for(s, rate, params), 6 * rtt + s * 8 / speed) + 1.5 for s in sizes)


def run_lab(
    ctx: Context,
    params: dict[str, Any],
    rate: int,
    ber: float,
    mode: str,
    prefix: str,
) -> dict[int, Transfer | str]:
    """Every size of one rate × BER × mode on one lab, smallest first."""
    sizes = sorted(int(x) for x in params["sizes"])
    gateway = GATEWAY if mode == "split" else None
    if gateway:
        hybla.ensure()  # the gateways' satellite leg asks for hybla
    out: dict[int, Transfer | str] = {}
    overrides = lab_overrides(rate, float(params["rtt_ms"]), ber)
    with lab.running("geo-acts-t1", gateway=gateway, overrides=overrides, prefix=prefix) as lb:
        for size in sizes:
            ctx.log(f"{NAME}: {prefix} {variant(rate, size, ber, mode)}")
            out[size] = attempt(
                lb,
                E2E_CC,
                size,
                cap_for(size, rate, params),
                sample_gateway_leg=gateway is not None,
            )
    return out


def cell_records(var: str, tr: Transfer, rate: int, rtt_s: float, split: bool) -> list[records.Record]:
    if split and not tr.cwnd:
        return [
            records.skipped(
                NAME,
                var,
                "no intercepted socket seen at the hub: the flow was not split",
            )
        ]
    if not split and tr.cc_actual and tr.cc_actual != E2E_CC:
        return [records.skipped(NAME, var, f"sender ran {tr.cc_actual}, not {E2E_CC}")]
    limit = metrics.physical_limit_s(tr.size_bytes, rate, rtt_s, RTTS_BEFORE_DATA)
    done = tr.completion_s()
    if done is None:
        note = f"{tr.bytes_received / 1e6:.2f} of {tr.size_bytes / 1e6:g} MB in {tr.elapsed_s:.0f} s cap"
        rate_bps = tr.goodput_bps()
        eff = 100.0 * (tr.bytes_received * 8 / rate) / max(tr.elapsed_s, 1e-9)
    else:
        note, rate_bps, eff = "", tr.size_bytes * 8 / done, 100.0 * limit / done
    out = [
        records.measured(NAME, var, "throughput", rate_bps / 1e3, "kbit/s", note),
        records.measured(NAME, var, "efficiency", eff, "%", note),
    ]
    if done is not None:
        out.append(records.measured(NAME, var, "completion", done, "s"))
    return out


def run(ctx: Context, params: dict[str, Any]) -> list[records.Record]:
    out: list[records.Record] = []
    rtt_s = float(params["rtt_ms"]) / 1000
    sizes = [int(s) for s in params["sizes"]]
    jobs_spec: list[tuple[int, float, str]] = []
    for rate in params["rates_bps"]:
        for ber in params["bers"]:
            for mode in params["modes"]:
                jobs_spec.append((int(rate), float(ber), mode))
    jobs_spec = lanes.longest_first(jobs_spec, lambda j: expected_s(j, params))
    jobs: list[Callable[[str], dict[int, Transfer | str]]] = [partial(run_lab, ctx, params, *j) for j in jobs_spec]
    results = lanes.run_parallel(jobs, int(params["lanes"]))
    curves: dict[tuple[str, str], dict[str, list[tuple[float, float]]]] = {}
    for (rate, ber, mode), res in zip(jobs_spec, results, strict=True):
        if isinstance(res, BaseException):
            for size in sizes:
                out.append(records.skipped(NAME, variant(rate, size, ber, mode), f"lab failed: {res}"[:300]))
            continue
        line = curves.setdefault((f"BER {ber_label(ber)}", rate_label(rate)), {}).setdefault(mode, [])
        for size in sizes:
            var = variant(rate, size, ber, mode)
            tr = res.get(size, "not run: the lab stopped before this size")
            if isinstance(tr, str):
                out.append(records.skipped(NAME, var, tr))
                continue
            ctx.raw.setdefault(NAME, {})[var] = {k: v for k, v in tr.to_json().items() if k != "samples"} | {
                "completion_s": tr.completion_s()
            }
            recs = cell_records(var, tr, rate, rtt_s, mode == "split")
            out += recs
            thr = next((r.value for r in recs if r.metric == "throughput"), None)
            if thr is not None:
                line.append((size / KB, thr))
    rows = [f"BER {ber_label(b)}" for b in params["bers"]]
    cols = [rate_label(int(r)) for r in params["rates_bps"]]
    hl = {
        (row, col): [
            (int(r) / 1e3, "link rate"),
            (PAPER_E2E_CEILING_BPS / 1e3, "paper e2e ceiling (8 KB window)"),
        ]
        for row in rows
        for col, r in zip(cols, params["rates_bps"], strict=True)
    }
    plots.line_grid(
        ctx.plot_path(f"{NAME}-throughput"),
        f"Throughput vs file size, {params['rtt_ms']:g} ms RTT: end to end (cubic) vs split (Perigee)",
        "file size [KB]",
        "throughput [kbit/s]",
        rows,
        cols,
        {k: {m: sorted(v) for m, v in lines.items()} for k, lines in curves.items()},
        hl,
    )
    return out


def doc_extra(recs: list[records.Record]) -> str:
    """Ours per rate × size at each BER (throughput, e2e → split) beside the paper's shape."""
    thr = {r.variant: r.value for r in recs if r.metric == "throughput"}
    capped = {r.variant for r in recs if r.metric == "throughput" and " cap" in r.note}
    skipped = {r.variant for r in recs if r.metric == records.SKIPPED}
    cells_seen = [v.split("/") for v in set(thr) | skipped if v.count("/") == 3]
    rates = sorted({c[0] for c in cells_seen}, key=_rate_key)
    sizes = sorted({c[1] for c in cells_seen}, key=_size_key)
    bers = sorted({c[2] for c in cells_seen}, key=lambda b: float(b.removeprefix("ber=")))
    intro = (
        f"The paper's shape (Bharadwaj et al., sec. 4): {PAPER_SHAPE}. Our end-to-end baseline is a "
        "modern Linux sender and receiver (window scaling, 64 MB buffers, IW10, SACK), so it is never "
        "window-limited as the paper's 8 KB-window stacks were: what split buys here is slow start at "
        "the gateway's short RTT plus Hybla on the satellite hop, and loss recovery local to that hop.\n"
    )
    blocks = [intro, not_run_summary(recs)]
    for ber in bers:
        lines = [
            f"Throughput, kbit/s, e2e → split, {ber}:\n",
            "| rate | " + " | ".join(sizes) + " |",
            "|---|" + "---|" * len(sizes),
        ]
        for rate in rates:
            cells = []
            for size in sizes:
                e_var, s_var = f"{rate}/{size}/{ber}/e2e", f"{rate}/{size}/{ber}/split"
                e, s = thr.get(e_var), thr.get(s_var)
                if e is None and s is None:
                    cells.append("not run")
                else:
                    e_mark = "*" if e_var in capped else ""
                    s_mark = "*" if s_var in capped else ""
                    cells.append(f"{_fmt(e)}{e_mark} → {_fmt(s)}{s_mark}")
            lines.append(f"| {rate}bit/s | " + " | ".join(cells) + " |")
        blocks.append("\n".join(lines))
    if capped:
        blocks.append(
            "\\* still running at its cap: throughput over the part delivered (the record's note says how much)."
        )
    return "\n\n".join(blocks)


def not_run_summary(recs: list[records.Record]) -> str:
    """Which sizes were left out at which rate (a lab that failed or stopped early)."""
    left_out: dict[str, set[str]] = {}
    for r in recs:
        if r.metric == records.SKIPPED and r.note.startswith("not run:"):
            rate, size = r.variant.split("/")[:2]
            left_out.setdefault(size, set()).add(rate)
    if not left_out:
        return "Every cell of this run's grid ran."
    parts = [
        f"{size} at {', '.join(sorted(rates, key=_rate_key))}"
        for size, rates in sorted(left_out.items(), key=lambda kv: _size_key(kv[0]))
    ]
    return "Not run (each record says why): " + "; ".join(parts) + " (bit/s)."


def _fmt(v: float | None) -> str:
    return "–" if v is None else f"{v:.0f}"


def _rate_key(label: str) -> float:
    return float(label[:-1]) * (1e6 if label.endswith("M") else 1e3)


def _size_key(label: str) -> int:
    return int(label[:-2]) * (MB if label.endswith("MB") else KB)
