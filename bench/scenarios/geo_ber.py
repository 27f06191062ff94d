"""Bit errors at today's rates: 5 and 50 MB downloads on geo-hts (50 Mbit/s, 600 ms) at BER 0 to 1e-5
and under Gilbert–Elliott burst loss, end to end and through Perigee, each satellite-leg option side by
side (docs/hybla.md, hybla_ld)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from bench import hybla, lab, metrics, plots, records
from bench.context import Context
from bench.profiles import LinkFigures, figures
from bench.tools import gwconfig, lanes
from bench.transfer import Transfer, attempt, limit_records

NAME = "geo-ber"
KIND = "bit-errors"
TITLE = "Bit errors on geo-hts: 5 and 50 MB at BER 0 to 1e-5 and burst loss, each satellite-leg option"
DESCRIPTION = (
    "Downloads server → client on `geo-hts` (50 Mbit/s forward, 600 ms RTT, 1-BDP buffer) with the emulator's bit "
    "error rate set in both directions, or Gilbert–Elliott burst loss (`ge`: per frame P(good→bad) 0.001, "
    "P(bad→good) 0.05, half the frames of a bad spell lost: ~1% of frames in bursts of ~10 losses, the average "
    "loss of BER 1e-6 but bunched). Each lane is its own lab and all lanes step through the conditions in the "
    "same order at the same time, so every figure has its baselines from the same minutes. `e2e/<cc>`: no "
    "gateway, `<cc>` on the server's socket. Perigee: satlab `--gateway both` with one config whose classes "
    "pick the variant by server port: `both/default` (the appliance's defaults: no class names a congestion "
    "control, every setting as satlab starts it; what a new user gets), `hub/hybla` (the terminal bypasses the "
    "flow: Perigee at the hub only, the client's own TCP receives), `both/hybla` (the former default: Hybla on "
    "the satellite leg named by a class, otherwise the same), and the satellite-leg options for lossy links "
    "with the buffers the BoD page derives for a lossy profile (4 windows: `both/hybla_ld`, Hybla with loss "
    "differentiation; `both/bbr`, the per-class BBR choice). The server's socket runs cubic on the "
    "terrestrial leg. `limit` = 1.5 RTT + size/rate + "
    "½ RTT (a download's physical limit); `vs_limit` = completion / limit; `pct_optimal` = 100 × limit / "
    "completion, or for a transfer stopped at the cap 100 × its goodput / (size / limit). cwnd is the "
    "satellite-leg sender's (the hub's socket through Perigee, the server's end to end), sampled every 100 ms."
)
GE_BURST = "0.001,0.05,0,0.5"  # P_GB, P_BG, LOSS_GOOD, LOSS_BAD per frame (satlab link set --gilbert)
CONDITIONS = ("0", "1e-7", "1e-6", "1e-5", "ge")
PARAMS: dict[str, dict[str, Any]] = {
    "quick": {
        "profile": "geo-hts",
        "conditions": ["1e-6"],
        "sizes": [50_000_000],
        "caps_s": {"50000000": 25},
        # The headline comparison only: end-to-end BBR beside Perigee's defaults and the former
        # default (hybla), two labs at once.
        "lanes": [["e2e", ["e2e/bbr"]], ["gateway", ["both/default", "both/hybla"]]],
    },
    "full": {
        "profile": "geo-hts",
        "conditions": list(CONDITIONS),
        "sizes": [5_000_000, 50_000_000],
        # 25 s is 2.7x the 50 MB limit (9.2 s: above the 2x target at BER 1e-5), 8 s is 4x the 5 MB
        # limit (2.0 s): slower transfers are scored on the bytes they delivered by then.
        "caps_s": {"5000000": 8, "50000000": 25},
        "lanes": [
            ["e2e", ["e2e/cubic", "e2e/hybla"]],
            ["e2e", ["e2e/bbr"]],
            ["gateway", ["both/default", "hub/hybla", "both/hybla"]],
            ["gateway", ["both/hybla_ld", "both/bbr"]],
        ],
    },
}
DOWNLOAD_RTTS_BEFORE_DATA = 1.5
SERVER_CC = "cubic"  # the terrestrial leg's sender behind a gateway


@dataclass(frozen=True)
class Variant:
    """One way to carry the download: its server port selects the gateway class."""

    name: str
    port: int
    sender_cc: str  # the server socket's congestion control
    satellite_cc: str  # what runs on the satellite leg ("": the gateway's default, whatever that is)
    gateway: bool
    terminal_bypass: bool = False  # Perigee at the hub only
    loss_buffers: bool = False  # the BoD page's buffers for a lossy profile


VARIANTS = {
    v.name: v
    for v in (
        Variant("both/default", 5210, SERVER_CC, "", True),  # first: the tables lead with the defaults
        Variant("e2e/cubic", 5201, "cubic", "cubic", False),
        Variant("e2e/bbr", 5201, "bbr", "bbr", False),
        Variant("e2e/hybla", 5201, "hybla", "hybla", False),
        Variant("hub/hybla", 5212, SERVER_CC, "hybla", True, terminal_bypass=True),
        Variant("both/hybla", 5211, SERVER_CC, "hybla", True),
        Variant("both/hybla_ld", 5213, SERVER_CC, "hybla_ld", True, loss_buffers=True),
        Variant("both/bbr", 5214, SERVER_CC, "bbr", True, loss_buffers=True),
    )
}
# The figure the targets speak of: Perigee at both ends with the appliance's defaults.
HEADLINE = "both/default"
BASELINE = "e2e/bbr"
# 50 MB, Perigee both ends, defaults: x the limit at each condition (1e-5 also never slower than
# end-to-end BBR).
TARGETS_X = {"0": 1.05, "1e-6": 1.3, "1e-5": 2.0, "ge": 1.3}


def size_label(size: int) -> str:
    return f"{size / 1e6:g}MB"


def variant_key(cond: str, size: int, variant: str) -> str:
    return f"{cond}/{size_label(size)}/{variant}"


def condition_args(cond: str) -> list[str]:
    """`satlab link set` arguments (both directions) for a condition: a BER, or burst loss."""
    if cond == "ge":
        return ["--ber", "0", "--gilbert", GE_BURST]
    return ["--ber", cond, "--gilbert", "off"]


def gateway_classes(role: str, loss_buffer_bytes: int) -> list[dict[str, Any]]:
    """The classes that tell the Perigee variants apart, by server port, for one gateway."""
    out = []
    for prio, v in enumerate((v for v in VARIANTS.values() if v.gateway), start=10):
        sat: dict[str, Any] = {
            "congestion_control": None,
            "buffer_bytes": 0,
            "pacing_rate_bps": 0,
        }
        if role == "hub" and v.satellite_cc:
            sat["congestion_control"] = v.satellite_cc
        if v.loss_buffers:
            sat["buffer_bytes"] = loss_buffer_bytes
        bypass = role == "terminal" and v.terminal_bypass
        out.append(
            {
                "name": v.name.replace("/", "-"),
                "priority": prio,
                "match": {"protocol": "tcp", "dports": [str(v.port)]},
                "action": "bypass" if bypass else "accelerate",
                "satellite": sat if not bypass else {},
            }
        )
    return out


def loss_buffer_bytes(profile: str) -> int:
    """The socket buffer the BoD page derives for this link with bit errors (the API's own
    derivation: four windows of the forward direction at either end)."""
    hub = gwconfig.derive_tuning(gwconfig.plain_link_inputs(profile, ber=1e-6, role="hub"))
    return int(hub["sndbuf_bytes"])


def configure_gateways(lb: lab.Lab, buffer_bytes: int) -> None:
    for role in ("hub", "terminal"):
        sock = gwconfig.socket_path(lb.prefix, role)
        cfg = gwconfig.get_config(sock)
        cfg["classes"] = gateway_classes(role, buffer_bytes)
        cfg["revision"] = "bench-geo-ber"
        gwconfig.put_config(sock, cfg)


Result = dict[tuple[str, int, str], Transfer | str]


def run_lane(ctx: Context, params: dict[str, Any], kind: str, names: list[str], prefix: str) -> Result:
    """One lab, every condition × size × variant of this lane, in the order all lanes use."""
    gateway = "both" if kind == "gateway" else None
    for name in names:
        cc = VARIANTS[name].satellite_cc
        if cc in hybla.LOADED_BY_PERIGEE:
            hybla.ensure(cc)
    if gateway:
        hybla.ensure("hybla_ld")  # the gateway's classes ask for it
    out: Result = {}
    with lab.running(params["profile"], gateway=gateway, prefix=prefix) as lb:
        if gateway:
            configure_gateways(lb, loss_buffer_bytes(params["profile"]))
        for cond in params["conditions"]:
            lb.link_set("--link", "sat", "--dir", "both", *condition_args(cond))
            for size in params["sizes"]:
                cap = float(params["caps_s"][str(size)])
                for name in names:
                    v = VARIANTS[name]
                    ctx.log(f"{NAME}: {prefix} {variant_key(cond, size, name)}")
                    out[(cond, size, name)] = attempt(
                        lb,
                        v.sender_cc,
                        size,
                        cap,
                        sample_gateway_leg=v.gateway,
                        port=v.port,
                    )
    return out


def limit_s(size: int, link: LinkFigures) -> float:
    return metrics.physical_limit_s(size, link.forward_bps, link.rtt_s, DOWNLOAD_RTTS_BEFORE_DATA)


def pct_optimal(tr: Transfer, link: LinkFigures) -> float:
    """100 × limit / completion; for a transfer stopped at the cap, its goodput against the
    optimal rate (size / limit)."""
    limit = limit_s(tr.size_bytes, link)
    done = tr.completion_s()
    if done is not None:
        return 100.0 * limit / done
    return 100.0 * tr.goodput_bps() / (tr.size_bytes * 8 / limit)


def check(v: Variant, tr: Transfer) -> str | None:
    """Why a transfer does not measure its variant (None when it does)."""
    if v.gateway and not tr.cwnd:
        return "no intercepted socket seen at the hub: the flow was not split"
    if v.satellite_cc and tr.cc_actual and tr.cc_actual != v.satellite_cc:
        return f"the satellite leg ran {tr.cc_actual}, not {v.satellite_cc}"
    return None


def transfer_records(key: str, tr: Transfer, link: LinkFigures, cap: float) -> list[records.Record]:
    pct = records.measured(NAME, key, "pct_optimal", pct_optimal(tr, link), "%")
    return limit_records(NAME, key, tr, limit_s(tr.size_bytes, link), cap, [pct])


def run(ctx: Context, params: dict[str, Any]) -> list[records.Record]:
    link = figures(params["profile"])
    out: list[records.Record] = []
    jobs: list[Callable[[str], Result]] = []
    lane_names: list[list[str]] = []
    for kind, names in params["lanes"]:
        usable = []
        for name in names:
            _, skipped = hybla.filter_ccs([cc for cc in [VARIANTS[name].satellite_cc] if cc])
            if skipped:
                for cond in params["conditions"]:
                    for size in params["sizes"]:
                        out.append(
                            records.skipped(
                                NAME,
                                variant_key(cond, size, name),
                                next(iter(skipped.values())),
                            )
                        )
            else:
                usable.append(name)
        if usable:
            jobs.append(partial(run_lane, ctx, params, kind, usable))
            lane_names.append(usable)
    results: Result = {}
    for names, res in zip(lane_names, lanes.run_parallel(jobs, len(jobs)), strict=True):
        if isinstance(res, BaseException):
            for cond in params["conditions"]:
                for size in params["sizes"]:
                    for name in names:
                        results[(cond, size, name)] = f"lab failed: {type(res).__name__}: {res}"[:300]
            continue
        results.update(res)
    good: dict[tuple[str, int, str], Transfer] = {}
    for (cond, size, name), tr in sorted(results.items(), key=lambda kv: order_key(kv[0], params)):
        key = variant_key(cond, size, name)
        reason = tr if isinstance(tr, str) else check(VARIANTS[name], tr)
        if reason:
            out.append(records.skipped(NAME, key, reason))
            continue
        assert not isinstance(tr, str)
        ctx.raw.setdefault(NAME, {})[key] = tr.to_json()
        out += transfer_records(key, tr, link, float(params["caps_s"][str(size)]))
        good[(cond, size, name)] = tr
    plot(ctx, params, good, link)
    return out


def order_key(k: tuple[str, int, str], params: dict[str, Any]) -> tuple[int, int, int]:
    cond, size, name = k
    return (list(params["conditions"]).index(cond), size, list(VARIANTS).index(name))


def plot(
    ctx: Context,
    params: dict[str, Any],
    good: dict[tuple[str, int, str], Transfer],
    link: LinkFigures,
) -> None:
    names = [n for n in VARIANTS if any(k[2] == n for k in good)]
    conds = list(params["conditions"])
    for size in params["sizes"]:
        bars = {
            n: [pct_optimal(good[(c, size, n)], link) if (c, size, n) in good else None for c in conds] for n in names
        }
        plots.grouped_bars(
            ctx.plot_path(f"{NAME}-{size_label(size)}"),
            f"{size_label(size)} on {link.name}: % of optimal (limit / completion)",
            "% of optimal",
            [f"BER {c}" if c != "ge" else "burst (GE)" for c in conds],
            bars,
        )
    for cond in ("1e-6", "ge"):
        size = max(params["sizes"])
        runs = {n: good[(cond, size, n)] for n in names if (cond, size, n) in good}
        if not runs:
            continue
        plots.time_series(
            ctx.plot_path(f"{NAME}-{cond}-timeline"),
            f"{size_label(size)} on {link.name}, {'BER ' + cond if cond != 'ge' else 'burst loss (GE)'}: "
            "satellite-leg cwnd and goodput",
            [
                ("cwnd [segments]", {n: tr.cwnd for n, tr in runs.items()}),
                (
                    "goodput, 1 s [Mbit/s]",
                    {
                        n: [
                            (t, v / 1e6)
                            for t, v in metrics.goodput_series(metrics.link_progress(tr.samples, link.forward_bps))
                        ]
                        for n, tr in runs.items()
                    },
                ),
            ],
            hlines={
                0: (link.forward_bps * link.rtt_s / 8 / 1448, "BDP"),
                1: (link.forward_bps / 1e6, "link rate"),
            },
        )


def bod_choice(cond: str) -> str:
    """What the BoD page names for geo-hts at this BER (the API's derivation)."""
    if cond == "ge":
        return "– (burst loss has no BER)"
    return gwconfig.derive_congestion_control(gwconfig.plain_link_inputs("geo-hts", ber=float(cond)))


def cell(recs: dict[tuple[str, str], records.Record], key: str) -> str:
    x, pct = recs.get((key, "vs_limit")), recs.get((key, "pct_optimal"))
    if pct is None or pct.value is None:
        return "not run"
    if x is None or x.value is None:
        return f"capped ({pct.value:.0f}%)"
    return f"{x.value:.2f}x ({pct.value:.0f}%)"


def verdicts(recs: dict[tuple[str, str], records.Record]) -> list[str]:
    """The targets, checked on this run's records."""
    out = []
    for cond, target in TARGETS_X.items():
        key = variant_key(cond, 50_000_000, HEADLINE)
        x, pct = recs.get((key, "vs_limit")), recs.get((key, "pct_optimal"))
        if pct is None or pct.value is None:
            continue
        label = "no loss" if cond == "0" else "burst loss (GE)" if cond == "ge" else f"BER {cond}"
        seen = f"{x.value:.2f}x" if x is not None and x.value is not None else f"capped ({pct.value:.0f}%)"
        met = x is not None and x.value is not None and x.value <= target
        out.append(
            f"{label}, 50 MB, {HEADLINE}: {seen} the limit, target <= {target:g}x: {'met' if met else 'NOT met'}."
        )
    slower = []
    compared = 0
    for (key, metric), rec in recs.items():
        if metric != "pct_optimal" or not key.endswith(f"/{HEADLINE}") or rec.value is None:
            continue
        base = recs.get((key.replace(f"/{HEADLINE}", f"/{BASELINE}"), "pct_optimal"))
        if base is None or base.value is None:
            continue
        compared += 1
        if rec.value < base.value:
            slower.append(key.rsplit("/", 2)[0])
    if compared:
        out.append(
            f"{HEADLINE} vs {BASELINE} in the same run, {compared} conditions x sizes: "
            + ("never slower." if not slower else f"slower at {', '.join(slower)}.")
        )
    return out


def doc_extra(recs_list: list[records.Record]) -> str:
    """Every condition and size beside its baselines; the targets' verdicts."""
    recs = {(r.variant, r.metric): r for r in recs_list}
    conds = [c for c in CONDITIONS if any(r.variant.startswith(f"{c}/") for r in recs_list)]
    sizes = sorted({int(float(r.variant.split("/")[1][:-2]) * 1e6) for r in recs_list if r.variant.count("/") >= 2})
    names = [n for n in VARIANTS if any(r.variant.endswith(f"/{n}") for r in recs_list)]
    lines = [
        "| condition | size | BoD page says | " + " | ".join(names) + " |",
        "|---|---|---|" + "---|" * len(names),
    ]
    for cond in conds:
        for size in sizes:
            row = [
                f"BER {cond}" if cond != "ge" else "burst (GE)",
                size_label(size),
                bod_choice(cond),
            ]
            row += [cell(recs, variant_key(cond, size, n)) for n in names]
            lines.append("| " + " | ".join(row) + " |")
    text = (
        "Completion / physical limit and % of optimal (capped: stopped at the cap, scored on its goodput). "
        "`BoD page says`: the satellite congestion control the BoD tuning derives for geo-hts at that BER.\n\n"
        + "\n".join(lines)
    )
    checks = verdicts(recs)
    if checks:
        text += "\n\n" + "\n".join(f"- {c}" for c in checks)
    return text
