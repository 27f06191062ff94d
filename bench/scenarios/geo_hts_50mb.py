"""A 50 MB download on geo-hts, end to end and through the gateway at the hub."""

from __future__ import annotations

from typing import Any

from bench import hybla, lab, metrics, plots, records
from bench.context import Context
from bench.profiles import LinkFigures, figures
from bench.transfer import Transfer, attempt, completion_record

NAME = "geo-hts-50mb"
KIND = "transfer"
TITLE = "50 MB download on geo-hts"
DESCRIPTION = (
    "50 MB server → client on `geo-hts` (50 Mbit/s forward, 600 ms RTT). End-to-end variants set the "
    "sender's congestion control; `gateway-hub` runs satlab with `--gateway hub`, so the splitter at the hub "
    "carries the satellite leg (Hybla) while the server's socket runs the named cc on the short terrestrial "
    "leg; `gateway-both` adds the terminal's splitter, whose satellite socket opens a large receive window "
    "at once (its 2 x BDP receive buffer, with no route initrwnd to lower it), where a hub-only gateway waits for "
    "the client's own window to grow "
    "(~3x per RTT from 64 KB). `limit` is the physical limit of a download: 1.5 RTT before the first data byte can "
    "leave the "
    "server (handshake + request), size/rate, ½ RTT propagation; `efficiency` = limit / completion. "
    "Where the time went: `rwnd_limited` / `sndbuf_limited` = time the satellite-leg sender (the hub's "
    "socket through the gateway, the server's end to end) was held back by the receiver's window / its own "
    "send buffer; `link_drops` and `max_queue` = the emulator's forward direction during the transfer. "
    "A hub-only gateway cannot beat the client's window ramp: its completion minus `rwnd_limited` is "
    "what the same gateway does for a receiver that opens its window at once."
)
PARAMS: dict[str, dict[str, Any]] = {
    "quick": {
        "profile": "geo-hts",
        "size_bytes": 50_000_000,
        "timeout_s": 60,
        # The default Linux sender beside both placements; the other baselines run in full.
        "variants": [
            ["e2e", "cubic"],
            ["gateway-hub", "cubic"],
            ["gateway-both", "cubic"],
        ],
    },
    "full": {
        "profile": "geo-hts",
        "size_bytes": 50_000_000,
        "timeout_s": 90,
        "variants": [
            ["e2e", "cubic"],
            ["e2e", "reno"],
            ["e2e", "bbr"],
            ["e2e", "hybla"],
            ["gateway-hub", "cubic"],
            ["gateway-both", "cubic"],
        ],
    },
}
DOWNLOAD_RTTS_BEFORE_DATA = 1.5
GATEWAY_AT = {"gateway-hub": "hub", "gateway-both": "both"}  # satlab --gateway per mode
TARGET_FACTOR = 1.15  # target: completion within 1.15 x the physical limit


def transfer_records(scenario: str, variant: str, tr: Transfer, link: LinkFigures) -> list[records.Record]:
    """t90, completion, the physical limit and efficiency of one transfer."""
    out = []
    t90 = metrics.time_to_fraction(tr.samples, link.forward_bps, 0.9)
    if t90 is None:
        out.append(
            records.missing(
                scenario,
                variant,
                "t90",
                "s",
                "goodput never reached 90% of the link rate",
            )
        )
    else:
        out.append(records.measured(scenario, variant, "t90", t90, "s"))
        out.append(records.measured(scenario, variant, "t90", t90 / link.rtt_s, "RTT"))
    limit = metrics.physical_limit_s(tr.size_bytes, link.forward_bps, link.rtt_s, DOWNLOAD_RTTS_BEFORE_DATA)
    out.append(records.measured(scenario, variant, "limit", limit, "s"))
    out.append(completion_record(scenario, variant, tr))
    done = tr.completion_s()
    if done is not None:
        out.append(records.measured(scenario, variant, "efficiency", 100.0 * limit / done, "%"))
        out.append(
            records.measured(
                scenario,
                variant,
                "vs_limit",
                done / limit,
                "x",
                f"target through the gateway: <= {TARGET_FACTOR}x",
            )
        )
    return out


def where_time_went(
    scenario: str,
    variant: str,
    tr: Transfer,
    link_stats: dict[str, Any],
    rate_bps: float,
) -> list[records.Record]:
    """What held the satellite-leg sender back: the receiver's window, its own send buffer,
    the emulator's queue (drops, deepest standing queue)."""
    out = []
    for key, why in (
        ("rwnd_limited", "sender held back by the receiver's advertised window"),
        ("sndbuf_limited", "sender held back by its own send buffer"),
    ):
        if key in tr.limited_ms:
            out.append(records.measured(scenario, variant, key, tr.limited_ms[key] / 1000, "s", why))
    fwd = link_stats.get("forward") or {}
    if fwd:
        drops = sum(int(v) for v in (fwd.get("drops") or {}).values())
        out.append(records.measured(scenario, variant, "link_drops", drops, "frames", "forward direction"))
        queue_ms = int(fwd.get("max_queue_bytes", 0)) * 8 / rate_bps * 1000
        out.append(
            records.measured(
                scenario,
                variant,
                "max_queue",
                queue_ms,
                "ms",
                "deepest forward queue, as delay at the link rate",
            )
        )
    return out


def link_stats(lb: lab.Lab) -> dict[str, Any]:
    """The emulator's counters, or {} when they cannot be read (the figures are only context)."""
    try:
        return lb.link_stats()
    except lab.LabUnavailable:
        return {}


def run(ctx: Context, params: dict[str, Any]) -> list[records.Record]:
    out: list[records.Record] = []
    link = figures(params["profile"])
    size, timeout = int(params["size_bytes"]), float(params["timeout_s"])
    series: dict[str, list[tuple[float, float]]] = {}
    by_mode: dict[str, list[str]] = {}
    for mode, cc in params["variants"]:
        by_mode.setdefault(mode, []).append(cc)
    for mode, ccs in by_mode.items():
        usable, skipped = hybla.filter_ccs(ccs)
        for cc, reason in skipped.items():
            out.append(records.skipped(NAME, f"{mode}/{cc}", reason))
        if not usable:
            continue
        gateway = GATEWAY_AT.get(mode)
        if gateway:
            hybla.ensure()  # the gateway's satellite leg asks for hybla; load it first if we can
        try:
            with lab.running(params["profile"], gateway=gateway) as lb:
                for cc in usable:
                    variant = f"{mode}/{cc}"
                    ctx.log(f"{NAME}: {variant}")
                    try:
                        lb.link_reset()
                    except lab.LabUnavailable:
                        pass  # counters since lab start: still an upper bound on drops
                    tr = attempt(lb, cc, size, timeout, sample_gateway_leg=gateway is not None)
                    stats = link_stats(lb)
                    if isinstance(tr, str):
                        out.append(records.skipped(NAME, variant, tr))
                        continue
                    ctx.raw.setdefault(NAME, {})[variant] = tr.to_json()
                    if gateway and not tr.cwnd:
                        out.append(
                            records.skipped(
                                NAME,
                                variant,
                                "no intercepted socket seen at the hub: the flow did not go through the gateway",
                            )
                        )
                        continue
                    if not gateway and tr.cc_actual != cc:
                        out.append(records.skipped(NAME, variant, f"sender ran {tr.cc_actual!r}, not {cc}"))
                        continue
                    out += transfer_records(NAME, variant, tr, link)
                    out += where_time_went(NAME, variant, tr, stats, link.forward_bps)
                    if tr.cwnd:
                        leg = f"satellite-leg socket at the hub ran {tr.cc_actual or 'unknown cc'}" if gateway else ""
                        out.append(
                            records.measured(
                                NAME,
                                variant,
                                "max_cwnd",
                                max(c for _, c in tr.cwnd),
                                "segments",
                                leg,
                            )
                        )
                    series[variant] = [
                        (t, v / 1e6)
                        for t, v in metrics.goodput_series(metrics.link_progress(tr.samples, link.forward_bps))
                    ]
        except lab.LabUnavailable as exc:
            for cc in usable:
                out.append(records.skipped(NAME, f"{mode}/{cc}", str(exc)[:300]))
    if series:
        plots.time_series(
            ctx.plot_path(f"{NAME}-goodput"),
            f"50 MB on {link.name}: goodput (1 s window)",
            [("link-feasible goodput, 1 s [Mbit/s]", series)],
            hlines={0: (0.9 * link.forward_bps / 1e6, "90% of link rate")},
        )
    return out
