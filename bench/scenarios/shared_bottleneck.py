"""Congestion still counts: two downloads through Perigee share a 10 Mbit/s satellite carrier with a
deep drop-tail queue and no random loss; the queue it keeps and the shares each satellite-leg
option gives."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from bench import hybla, lab, metrics, plots, procs, records
from bench.context import Context
from bench.lab import ENDLESS_BYTES, SERVER_V4
from bench.tools import gwconfig, lanes

NAME = "shared-bottleneck"
KIND = "fairness"
TITLE = (
    "A 10 Mbit/s satellite bottleneck shared by two flows, no random loss: queue and fairness per satellite-leg option"
)
DESCRIPTION = (
    "satlab `geo-hts` with the forward carrier shaped to 10 Mbit/s (`--fwd-rate 10M`; the emulator's drop-tail "
    "queue stays 3.75 MB: 3 s, 5 BDP at that rate) and Perigee at both ends, tuned by the lab for that carrier "
    "(pacing, windows, cwnd ceiling: 2 BDP per flow) but without the hub's aggregate shaper, so the queue the "
    "flows build is the carrier's, where a congestion control can see it (a shaper in the sending host's own "
    "qdisc would hold each socket's share with TCP small queues whatever the congestion control). Two "
    "downloads server → client, the second `lead_s` after the first, both split; each variant names the "
    "satellite-leg congestion control of the first and the second flow (by server port, gateway classes). "
    "Throughput = bytes received from `warmup_s` after the second flow starts to the end; Jain's index over "
    "the two. The forward queue is read from the emulator every 200 ms over the same window: `queue_median`, "
    "`queue_p95`, and `standing_queue` = the largest of the minima over consecutive 3 s windows (five base "
    "RTTs): the part of the queue that did not drain for five RTTs; the BDP is 600 ms at this rate. `<cc>+e2e`: "
    "the second flow is bypassed at both gateways, end to end with the server's cubic across the same carrier "
    "(does the gateway's default starve a flow it does not split?); `default+e2e`: the same with the first "
    "flow's class naming no congestion control, so it runs the config's default and any automatic switch "
    "(its satellite leg's congestion control at the hub is recorded)."
)
PORTS = (5201, 5202)
# A flow both gateways bypass: end to end (the server's cubic) across the same carrier.
E2E = "e2e"
# The config's default congestion control with whatever the gateway switches it to by itself
# (satleg_auto.rs): the class names none. The hub's choice is recorded in the results.
DEFAULT = "default"
PARAMS: dict[str, dict[str, Any]] = {
    "quick": {
        "profile": "geo-hts",
        "rate_bps": 10_000_000,
        "duration_s": 30,
        "lead_s": 6,
        "warmup_s": 5,
        "variants": [["hybla_ld", "hybla_ld"], ["hybla", "hybla"]],
    },
    "full": {
        "profile": "geo-hts",
        "rate_bps": 10_000_000,
        "duration_s": 40,
        "lead_s": 8,
        "warmup_s": 5,
        "variants": [
            ["hybla", "hybla"],
            ["hybla_ld", "hybla_ld"],
            ["bbr", "bbr"],
            ["hybla_ld", "hybla"],
            # The default beside an end-to-end flow (the server's cubic, bypassed at both gateways):
            # first as the class names it, then as the appliance runs it, automatic switches included.
            ["hybla_ld", E2E],
            [DEFAULT, E2E],
        ],
    },
}
QUEUE_PERIOD_S = 0.2
STANDING_WINDOW_S = 3.0  # five base RTTs


def variant_name(ccs: list[str]) -> str:
    return f"{ccs[0]}+{ccs[1]}"


def standing_queue(samples: list[tuple[float, float]], window_s: float) -> float:
    """The largest, over consecutive windows of `window_s`, of the smallest sample in each: the
    part of the queue that stood through a whole window (0 for no samples)."""
    if not samples:
        return 0.0
    t0 = samples[0][0]
    mins: dict[int, float] = {}
    for t, q in samples:
        k = int((t - t0) // window_s)
        mins[k] = min(q, mins.get(k, q))
    full = [v for k, v in mins.items() if k < max(mins)]  # the last window may be partial
    return max(full or list(mins.values()))


def configure(lb: lab.Lab, ccs: list[str]) -> None:
    """Classes by server port give each flow its satellite-leg congestion control; the hub's
    aggregate shaper goes off."""
    for role in ("hub", "terminal"):
        sock = gwconfig.socket_path(lb.prefix, role)
        cfg = gwconfig.get_config(sock)
        cfg["classes"] = [
            {
                "name": f"flow{i + 1}",
                "priority": 10 + i,
                "match": {"protocol": "tcp", "dports": [str(port)]},
                "action": "bypass" if cc == E2E else "accelerate",
                "satellite": {}
                if cc == E2E
                else {
                    "congestion_control": cc if role == "hub" and cc != DEFAULT else None,
                    "buffer_bytes": 0,
                    "pacing_rate_bps": 0,
                },
            }
            for i, (port, cc) in enumerate(zip(PORTS, ccs, strict=True))
        ]
        cfg["shaping"] = {"enabled": False}
        cfg["revision"] = "bench-shared-bottleneck"
        gwconfig.put_config(sock, cfg)


def serve(lb: lab.Lab, port: int, seconds: float) -> procs.Background:
    return procs.Background(
        lb.exec_argv(
            "server",
            procs.tool_argv(
                "bench.tools.flow",
                "serve",
                "--bind",
                SERVER_V4,
                "--port",
                str(port),
                "--cc",
                "cubic",
                "--bytes",
                str(ENDLESS_BYTES),
                "--timeout",
                str(seconds + 10),
            ),
        )
    )


def fetch(lb: lab.Lab, port: int, seconds: float) -> procs.Background:
    return procs.Background(
        lb.exec_argv(
            "client",
            procs.tool_argv(
                "bench.tools.flow",
                "fetch",
                "--connect",
                SERVER_V4,
                "--port",
                str(port),
                "--bytes",
                str(ENDLESS_BYTES),
                "--timeout",
                str(seconds),
            ),
        )
    )


def hub_cc(lb: lab.Lab) -> dict[int, str]:
    """The congestion control of each split flow's satellite leg at the hub, by server port, as the
    hub reports it (with the peer path its satellite socket is a peer connection, on another port)."""
    from perigee_control.client import GatewayClient

    flows = GatewayClient(gwconfig.socket_path(lb.prefix, "hub")).flows("live").flows
    return {
        int(f.server.rsplit(":", 1)[1]): f.satellite.cc
        for f in flows
        if f.satellite is not None and int(f.server.rsplit(":", 1)[1]) in PORTS
    }


def one_run(ctx: Context, params: dict[str, Any], ccs: list[str], prefix: str) -> dict[str, Any]:
    for cc in ccs:
        if cc not in (E2E, DEFAULT) and cc in hybla.LOADED_BY_PERIGEE:
            hybla.ensure(cc)
    duration, lead = float(params["duration_s"]), float(params["lead_s"])
    rate = f"{int(params['rate_bps'])}"
    with lab.running(params["profile"], gateway="both", overrides=["--fwd-rate", rate], prefix=prefix) as lb:
        configure(lb, ccs)
        ctx.log(f"{NAME}: {prefix} {variant_name(ccs)}")
        queue: list[tuple[float, float]] = []
        stop = threading.Event()

        def poll() -> None:
            while not stop.is_set():
                try:
                    queue.append((time.monotonic(), float(lb.forward_queue_bytes())))
                except lab.LabUnavailable:
                    pass
                stop.wait(QUEUE_PERIOD_S)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        try:
            with (
                serve(lb, PORTS[0], duration + lead) as s1,
                serve(lb, PORTS[1], duration) as s2,
            ):
                s1.wait_line("LISTENING", timeout=15)
                s2.wait_line("LISTENING", timeout=15)
                with fetch(lb, PORTS[0], duration + lead) as f1:
                    time.sleep(lead)
                    with fetch(lb, PORTS[1], duration) as f2:
                        time.sleep(float(params["warmup_s"]))
                        seen = hub_cc(lb)
                        second = f2.result(timeout=duration + 30)
                    first = f1.result(timeout=duration + 30)
        finally:
            stop.set()
            poller.join(timeout=5)
    for name, got in (("first", first), ("second", second)):
        if got.get("t_start") is None or not got.get("samples"):
            raise procs.ToolError(f"{name} fetch failed: {got.get('error')}")
    return {"first": first, "second": second, "queue": queue, "hub_cc": seen}


def window_rate_bps(samples: list[tuple[float, float]], t_from: float, t_to: float) -> float:
    got = metrics.cumulative_at(samples, t_to) - metrics.cumulative_at(samples, t_from)
    return got * 8 / (t_to - t_from) if t_to > t_from else 0.0


def summarize(
    variant: str, ccs: list[str], res: dict[str, Any], params: dict[str, Any]
) -> tuple[list[records.Record], str | None]:
    """The records of one run, or why it does not measure its variant."""
    seen = {int(k): v for k, v in res["hub_cc"].items()}
    for port, cc in zip(PORTS, ccs, strict=True):
        if cc == DEFAULT and seen.get(port) is None:
            return [], f"flow on :{port}: no split socket at the hub"
        if cc != DEFAULT and seen.get(port) != (None if cc == E2E else cc):
            return (
                [],
                f"flow on :{port}: the hub's satellite leg ran {seen.get(port) or 'no split socket'}, not {cc}",
            )

    def ran(cc: str, port: int) -> str:
        return f"default: the hub ran {seen[port]}" if cc == DEFAULT else cc

    first, second = res["first"], res["second"]
    t_from = second["t_start"] + float(params["warmup_s"])
    t_to = min(first["t_done"], second["t_done"])
    rates = [
        window_rate_bps(first["samples"], t_from, t_to),
        window_rate_bps(second["samples"], t_from, t_to),
    ]
    rate = float(params["rate_bps"])
    q_ms = [(t, b * 8 / rate * 1000) for t, b in res["queue"] if t_from <= t <= t_to]
    out = [
        records.measured(NAME, variant, "first_throughput", rates[0] / 1e6, "Mbit/s", ran(ccs[0], PORTS[0])),
        records.measured(NAME, variant, "second_throughput", rates[1] / 1e6, "Mbit/s", ran(ccs[1], PORTS[1])),
        records.measured(NAME, variant, "jain_index", metrics.jain_index(rates), ""),
        records.measured(NAME, variant, "utilization", 100 * sum(rates) / rate, "%"),
    ]
    if q_ms:
        values = [q for _, q in q_ms]
        out += [
            records.measured(NAME, variant, "queue_median", metrics.percentile(values, 50), "ms"),
            records.measured(NAME, variant, "queue_p95", metrics.percentile(values, 95), "ms"),
            records.measured(
                NAME,
                variant,
                "standing_queue",
                standing_queue(q_ms, STANDING_WINDOW_S),
                "ms",
                "BDP at this rate: 600 ms",
            ),
        ]
    else:
        out.append(
            records.missing(
                NAME,
                variant,
                "queue_median",
                "ms",
                "no queue samples from the emulator",
            )
        )
    return out, None


def run(ctx: Context, params: dict[str, Any]) -> list[records.Record]:
    out: list[records.Record] = []
    todo = []
    for ccs in params["variants"]:
        _, skipped = hybla.filter_ccs([cc for cc in dict.fromkeys(ccs) if cc not in (E2E, DEFAULT)])
        if skipped:
            out.append(records.skipped(NAME, variant_name(ccs), next(iter(skipped.values()))))
        else:
            todo.append(list(ccs))
    jobs: list[Callable[[str], dict[str, Any]]] = [partial(one_run, ctx, params, ccs) for ccs in todo]
    results = lanes.run_parallel(jobs, len(jobs))
    panels: dict[str, dict[str, list[tuple[float, float]]]] = {"queue": {}, "share": {}}
    for ccs, res in zip(todo, results, strict=True):
        variant = variant_name(ccs)
        if isinstance(res, BaseException):
            out.append(records.skipped(NAME, variant, f"{type(res).__name__}: {res}"[:300]))
            continue
        ctx.raw.setdefault(NAME, {})[variant] = res
        recs, problem = summarize(variant, ccs, res, params)
        if problem:
            out.append(records.skipped(NAME, variant, problem))
            continue
        out += recs
        t0 = res["first"]["t_start"]
        rate = float(params["rate_bps"])
        panels["queue"][variant] = [(t - t0, b * 8 / rate * 1000) for t, b in res["queue"]]
        second = res["second"]
        panels["share"][variant] = [
            (t + second["t_start"] - t0, v / 1e6)
            for t, v in metrics.goodput_series([(t - second["t_start"], b) for t, b in second["samples"]])
        ]
    if panels["queue"]:
        plots.time_series(
            ctx.plot_path(NAME),
            f"Two flows through Perigee on a {params['rate_bps'] / 1e6:g} Mbit/s carrier (second from "
            f"{params['lead_s']} s)",
            [
                ("carrier queue [ms]", panels["queue"]),
                ("second flow's goodput, 1 s [Mbit/s]", panels["share"]),
            ],
            hlines={
                0: (600.0, "BDP (600 ms)"),
                1: (params["rate_bps"] / 2e6, "fair share"),
            },
        )
    return out


def doc_extra(recs: list[records.Record]) -> str:
    by = {(r.variant, r.metric): r.value for r in recs}
    variants = [v for v in dict.fromkeys(r.variant for r in recs) if (v, "jain_index") in by]
    lines = [
        "| first+second flow | first | second | Jain | utilization | queue median | queue p95 | standing queue |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in variants:
        cells = [v]
        for metric, fmt in (
            ("first_throughput", "{:.2f} Mbit/s"),
            ("second_throughput", "{:.2f} Mbit/s"),
            ("jain_index", "{:.3f}"),
            ("utilization", "{:.0f}%"),
            ("queue_median", "{:.0f} ms"),
            ("queue_p95", "{:.0f} ms"),
            ("standing_queue", "{:.0f} ms"),
        ):
            value = by.get((v, metric))
            cells.append("n/a" if value is None else fmt.format(value))
        lines.append("| " + " | ".join(cells) + " |")
    verdict = ""
    jain, standing = (
        by.get(("hybla_ld+hybla_ld", "jain_index")),
        by.get(("hybla_ld+hybla_ld", "standing_queue")),
    )
    if jain is not None and standing is not None:
        verdict = (
            f"\n\nhybla_ld against itself: Jain {jain:.3f} (target >= 0.95: {'met' if jain >= 0.95 else 'NOT met'}), "
            f"standing queue {standing:.0f} ms (target: no standing queue above the BDP, 600 ms: "
            f"{'met' if standing <= 600 else 'NOT met'})."
        )
    return "Each variant beside the others from the same run (labs side by side):\n\n" + "\n".join(lines) + verdict
