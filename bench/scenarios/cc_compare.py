"""One long download per congestion control, end to end, on GEO profiles."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from bench import hybla, lab, metrics, plots, records
from bench.context import Context
from bench.profiles import figures
from bench.tools import lanes
from bench.transfer import Transfer, attempt

NAME = "cc-compare"
KIND = "congestion-control"
TITLE = "Congestion controls end to end over GEO"
DESCRIPTION = (
    "One long download server → client per congestion control (set on the sending socket with "
    "TCP_CONGESTION), no gateway, each on a freshly flushed path. `t90` is the first time the goodput, "
    "averaged over the trailing 1 s, reaches 90% of the forward link rate (seconds since connect(), and the "
    "same in base RTTs). Goodput is averaged over the second half of the run. cwnd is the sender's "
    "TCP_INFO snd_cwnd (segments) every 100 ms. Socket buffers are raised to 64 MB in every namespace, so "
    "they never limit the window. On profiles listed in `lanes` each cc runs on its own lab, all at once."
)
PARAMS: dict[str, dict[str, Any]] = {
    "quick": {
        # 50 Mbit/s runs one cc after another and each needs ~2 × t90 (7 s) for a steady second
        # half: four would not fit in 40 s. The T1 runs all four at once (t90 3-4 s).
        "profiles": ["geo-acts-t1"],
        "ccs": ["cubic", "reno", "bbr", "hybla"],
        "duration_s": {"geo-acts-t1": 12},
        "lanes": {"geo-acts-t1": 4},
    },
    "full": {
        "profiles": ["geo-hts", "geo-acts-t1"],
        "ccs": ["cubic", "reno", "bbr", "hybla"],
        # Every cc is past t90 (5-7 s on geo-hts, 3-4 s on the T1) well before half time, so the
        # second half is steady state; 45/30 s runs measured the same goodput for twice the time.
        "duration_s": {"geo-hts": 25, "geo-acts-t1": 20},
        # The T1 costs little CPU: its four runs go on four labs at once; 50 Mbit/s stays serial.
        "lanes": {"geo-acts-t1": 4},
    },
}
HUGE = 1 << 40  # the transfer is bounded by time, not size


def summarize(
    profile: str,
    cc: str,
    samples: list[tuple[float, float]],
    rate_bps: float,
    rtt_s: float,
    duration_s: float,
) -> list[records.Record]:
    variant = f"{profile}/{cc}"
    out = []
    t90 = metrics.time_to_fraction(samples, rate_bps, 0.9)
    if t90 is None:
        out.append(records.missing(NAME, variant, "t90", "s", f"not reached in {duration_s:.0f} s"))
    else:
        out.append(records.measured(NAME, variant, "t90", t90, "s"))
        out.append(records.measured(NAME, variant, "t90", t90 / rtt_s, "RTT"))
    # On the link-feasible series, so an out-of-order release just after mid-run is not counted twice.
    progress = metrics.link_progress(samples, rate_bps)
    half = duration_s / 2
    late = metrics.cumulative_at(progress, duration_s) - metrics.cumulative_at(progress, half)
    out.append(records.measured(NAME, variant, "goodput_2nd_half", late * 8 / half / 1e6, "Mbit/s"))
    return out


def measure_one(ctx: Context, profile: str, cc: str, duration: float, lb: lab.Lab) -> Transfer | str:
    ctx.log(f"{NAME}: {lb.prefix} {profile} {cc} for {duration:.0f}s")
    return attempt(lb, cc, HUGE, duration)


def on_own_lab(ctx: Context, profile: str, cc: str, duration: float, prefix: str) -> Transfer | str:
    with lab.running(profile, prefix=prefix) as lb:
        return measure_one(ctx, profile, cc, duration, lb)


def transfers(ctx: Context, profile: str, ccs: list[str], duration: float, n_lanes: int) -> dict[str, Transfer | str]:
    """Each cc's run: one after another on one lab, or (slow links) each on its own lab at once."""
    if n_lanes <= 1:
        with lab.running(profile) as lb:
            return {cc: measure_one(ctx, profile, cc, duration, lb) for cc in ccs}
    jobs: list[Callable[[str], Transfer | str]] = [partial(on_own_lab, ctx, profile, cc, duration) for cc in ccs]
    results = lanes.run_parallel(jobs, n_lanes)
    return {
        cc: (f"lab failed: {r}"[:300] if isinstance(r, BaseException) else r)
        for cc, r in zip(ccs, results, strict=True)
    }


def run(ctx: Context, params: dict[str, Any]) -> list[records.Record]:
    out: list[records.Record] = []
    ccs, skipped = hybla.filter_ccs(list(params["ccs"]))
    for profile in params["profiles"]:
        link = figures(profile)
        duration = float(params["duration_s"][profile])
        for cc, reason in skipped.items():
            out.append(records.skipped(NAME, f"{profile}/{cc}", reason))
        goodput: dict[str, list[tuple[float, float]]] = {}
        cwnd: dict[str, list[tuple[float, float]]] = {}
        n_lanes = int(params.get("lanes", {}).get(profile, 1))
        for cc, tr in transfers(ctx, profile, ccs, duration, n_lanes).items():
            if isinstance(tr, str):
                out.append(records.skipped(NAME, f"{profile}/{cc}", tr))
                continue
            ctx.raw.setdefault(NAME, {})[f"{profile}/{cc}"] = tr.to_json()
            if tr.cc_actual and tr.cc_actual != cc:
                out.append(
                    records.skipped(
                        NAME,
                        f"{profile}/{cc}",
                        f"sender ran {tr.cc_actual}, not {cc}",
                    )
                )
                continue
            out += summarize(profile, cc, tr.samples, link.forward_bps, link.rtt_s, duration)
            if tr.cwnd:
                out.append(
                    records.measured(
                        NAME,
                        f"{profile}/{cc}",
                        "max_cwnd",
                        max(c for _, c in tr.cwnd),
                        "segments",
                    )
                )
            if tr.retransmits is not None:
                out.append(
                    records.measured(
                        NAME,
                        f"{profile}/{cc}",
                        "retransmits",
                        tr.retransmits,
                        "segments",
                    )
                )
            goodput[cc] = [
                (t, v / 1e6) for t, v in metrics.goodput_series(metrics.link_progress(tr.samples, link.forward_bps))
            ]
            cwnd[cc] = tr.cwnd
        if goodput:
            plots.time_series(
                ctx.plot_path(f"{NAME}-{profile}"),
                f"{profile}: {link.forward_bps / 1e6:g} Mbit/s, RTT {link.rtt_s * 1000:.0f} ms, end to end",
                [
                    ("link-feasible goodput, 1 s [Mbit/s]", goodput),
                    ("sender cwnd [segments]", cwnd),
                ],
                hlines={0: (0.9 * link.forward_bps / 1e6, "90% of link rate")},
                log_panels=(1,),
            )
    return out
