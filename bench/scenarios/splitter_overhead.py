"""Performance: what the splitter costs on a path with no delay and no rate limit."""

from __future__ import annotations

import json
import os
import resource
import statistics
from typing import Any

from bench import lab, procs, records, vethlab
from bench.context import Context
from bench.tools import cpu, gwload, gwproc

NAME = "splitter-overhead"
KIND = "overhead"
TITLE = "Splitter overhead on zero-delay veth"
DESCRIPTION = (
    "client — gateway — server over plain veth pairs (no emulator, no delay, no rate limit), "
    "measured routed (the gateway namespace only forwards) and split (`perigee gateway run`, 4 workers, "
    "cubic on both legs whatever the host's default, the default relay buffer) in the same run. "
    "`throughput`: one download server → client (Python sender and receiver, 1 MiB writes; "
    "`size_bytes` long, so the path's first-second transient, up to 45 Gbit/s routed for a few hundred "
    "ms, does not decide the figure), repeated `reps` times alternating routed and split (the daemon "
    "restarted for each split run) so both see the same machine load, with receive flow steering (RPS) "
    "on every veth so a bulk flow arrives in order as from a NIC (without it the veths reorder segments "
    "across CPU backlogs and each TCP hop retransmits spuriously); the median is reported, the spread in "
    "the note. Two CPU placements, each with its own routed baseline: `routed`/`split` (dedicated) put "
    "both end hosts on CPU 0 and the gateway (its daemon and its veths' receive work) on the others, as "
    "when the gateway is its own machine; `routed-shared`/`split-shared` let all three share every CPU. "
    "`throughput_ratio` = median split / median routed, dedicated (target ≥ 0.6); "
    "`throughput_ratio_shared` the same, shared. `gateway_core_busy` and `gateway_core_cpu` (dedicated "
    "only, where the gateway's CPUs run nothing else): their busy time (user, system, irq, softirq) "
    "during the transfers, as a share and per Gbit/s — the whole cost of forwarding (routed) or of both "
    "TCP legs and the relay (split), kernel included. `path_cpu`: utime+stime of sender, receiver and "
    "(split) the daemon per Gbit/s; `gateway_cpu` is the daemon alone (softirq work is charged to "
    "whichever process it interrupts, so these undercount the kernel). "
    "`conn_rate`: new connections per second, "
    "each connect → 1-byte echo → close (steering off: its IPIs cost both variants ~30% here; no "
    "pinning), so it counts only connections that reached the server (target "
    "≥ 5,000/s), from the Rust `perigee-loadgen` client and echo server (threads × concurrency in flight; "
    "`conn_latency_p99`: connect start → echo back); the routed figure is their own ceiling on the machine that ran "
    "it. "
    "`idle_flow_rss`: growth of the daemon's RSS (master + workers) per idle split flow with N flows "
    "open at once (target ≤ 32 KiB), the client's flows spread over several processes (the machine that ran it caps "
    "a process at 20,000 fds). "
    "Two shared cores carry client, server and gateway at once: absolute numbers are noisy."
)
PARAMS: dict[str, dict[str, Any]] = {
    "quick": {
        "size_bytes": 2_000_000_000,
        "reps": 3,
        "rate_duration_s": 2.0,
        "rate_procs": 2,
        "rate_concurrency": 64,
        "rate_max_conns": 60_000,
        "idle_flows": 5_000,
        "workers": 4,
    },
    "full": {
        "size_bytes": 4_000_000_000,
        "reps": 5,
        "rate_duration_s": 4.0,
        "rate_procs": 2,
        "rate_concurrency": 64,
        "rate_max_conns": 120_000,
        "idle_flows": 10_000,
        "workers": 4,
    },
}
TARGET_RATIO = 0.6
TARGET_CONN_RATE = 5_000.0
TARGET_IDLE_KIB = 32.0
TRANSFER_PORT = 5201
HOLD_PROCS = 4  # client processes for the idle flows: 2,500 sockets each at 10,000
ECHO_PROCS = 2


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def download(vp: vethlab.VethPath, size: int, placement: vethlab.Placement) -> dict[str, Any]:
    """One transfer server → client on the placement's endpoint CPUs; bytes, seconds, and the
    endpoints' CPU seconds.

    Both endpoints are our children (`taskset` and `ip netns exec` exec the tool), so
    RUSAGE_CHILDREN grows by exactly their utime+stime once both are reaped.
    """
    serve = placement.pin("server", vp.exec_argv(
        "server",
        procs.tool_argv(
            "bench.tools.flow", "serve", "--bind", vethlab.SERVER_V4, "--port", str(TRANSFER_PORT),
            "--bytes", str(size), "--timeout", "60",
        ),
    ))  # fmt: skip
    fetch = placement.pin("client", vp.exec_argv(
        "client",
        procs.tool_argv(
            "bench.tools.flow", "fetch", "--connect", vethlab.SERVER_V4, "--port", str(TRANSFER_PORT),
            "--bytes", str(size), "--timeout", "60",
        ),
    ))  # fmt: skip
    cpu0 = _children_cpu_s()
    with procs.Background(serve) as server:
        server.wait_line("LISTENING", timeout=15)
        got = procs.run(fetch, timeout=80, check=False)
        server.result(timeout=20)
    cpu_s = _children_cpu_s() - cpu0
    fetched = json.loads(got.stdout.strip().splitlines()[-1])
    if fetched.get("error") or int(fetched["bytes"]) < size:
        raise procs.ToolError(f"download incomplete: {fetched.get('bytes')} of {size}: {fetched.get('error')}")
    seconds = fetched["t_done"] - fetched["t_connected"]
    return {"bytes": int(fetched["bytes"]), "seconds": seconds, "endpoint_cpu_s": cpu_s}


def timed_download(
    vp: vethlab.VethPath,
    size: int,
    placement: vethlab.Placement,
    daemon: gwproc.Daemon | None,
) -> dict[str, Any]:
    """One download, with the daemon's CPU seconds over it (0 when routed) and the busy
    ticks of the gateway's CPUs (daemon and kernel: forwarding or both TCP legs)."""
    hz = os.sysconf("SC_CLK_TCK")
    ticks0 = gwproc.snapshot(daemon.pids).cpu_ticks if daemon else 0
    busy0 = cpu.core_busy_ticks(placement.gateway_cpus)
    tr = download(vp, size, placement)
    busy1 = cpu.core_busy_ticks(placement.gateway_cpus)
    tr["daemon_cpu_s"] = (gwproc.snapshot(daemon.pids).cpu_ticks - ticks0) / hz if daemon else 0.0
    tr["gateway_cores_busy_s"] = (busy1 - busy0) / hz
    # The window includes starting the Python endpoints; the share is taken over the transfer's
    # own time (the gateway's CPUs are idle before the first byte).
    tr["gateway_cores_s"] = tr["seconds"] * len(placement.gateway_cpus)
    return tr


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Repetitions of one variant: the median rate and the totals for CPU per Gbit/s."""
    rates = sorted(r["bytes"] / r["seconds"] for r in runs)
    return {
        "runs": runs,
        "rate_Bps": statistics.median(rates),
        "rates_Bps": rates,
        "bytes": sum(r["bytes"] for r in runs),
        "endpoint_cpu_s": sum(r["endpoint_cpu_s"] for r in runs),
        "daemon_cpu_s": sum(r["daemon_cpu_s"] for r in runs),
        "gateway_cores_busy_s": sum(r["gateway_cores_busy_s"] for r in runs),
        "gateway_cores_s": sum(r["gateway_cores_s"] for r in runs),
    }


def conn_rate(vp: vethlab.VethPath, params: dict[str, Any], daemon: gwproc.Daemon | None) -> dict[str, Any]:
    """New connections per second across the path as it is now (routed or split)."""
    hz = os.sysconf("SC_CLK_TCK")
    with gwload.echo_server(vp.exec_argv, vethlab.SERVER_V4, ECHO_PROCS):
        ticks0 = gwproc.snapshot(daemon.pids).cpu_ticks if daemon else 0
        rate = gwload.conn_rate(
            vp.exec_argv,
            vethlab.SERVER_V4,
            params["rate_procs"],
            params["rate_concurrency"],
            params["rate_duration_s"],
            params["rate_max_conns"],
        )
        rate["daemon_cpu_s"] = (gwproc.snapshot(daemon.pids).cpu_ticks - ticks0) / hz if daemon else 0.0
    return rate


def transfer_variant(mode: str, placement: str) -> str:
    """The headline variants (`routed`, `split`) are the dedicated placement; the shared one is
    `routed-shared`, `split-shared`."""
    return mode if placement == "dedicated" else f"{mode}-shared"


def transfer_records(mode: str, placement: str, tr: dict[str, Any]) -> list[records.Record]:
    variant = transfer_variant(mode, placement)
    gbps = tr["rate_Bps"] * 8 / 1e9
    spread = ", ".join(f"{r * 8 / 1e9:.1f}" for r in tr["rates_Bps"])
    cpu_s = tr["endpoint_cpu_s"] + tr["daemon_cpu_s"]
    where = (
        "end hosts on CPU 0, gateway on the others"
        if placement == "dedicated"
        else "client, server and gateway share every CPU"
    )
    out = [
        records.measured(
            NAME, variant, "throughput", gbps, "Gbit/s",
            f"{where}; median of {len(tr['runs'])} alternating runs: {spread}",
        ),
        records.measured(
            NAME, variant, "path_cpu", gwload.cpu_per_gbps(cpu_s, tr["bytes"]), "% core per Gbit/s",
            "utime+stime of sender + receiver"
            + (" + gateway daemon" if mode == "split" else "")
            + " (softirq work is charged to whoever it interrupts)",
        ),
    ]  # fmt: skip
    if mode == "split":
        out.append(
            records.measured(
                NAME, variant, "gateway_cpu", gwload.cpu_per_gbps(tr["daemon_cpu_s"], tr["bytes"]),
                "% core per Gbit/s", "utime+stime of the daemon's master + workers only",
            )
        )  # fmt: skip
    if placement == "dedicated" and tr["gateway_cores_s"] > 0:
        # Only here do the gateway's CPUs run nothing else, so their busy time is its whole cost:
        # the daemon plus the kernel's forwarding (routed) or both TCP legs (split).
        out += [
            records.measured(
                NAME, variant, "gateway_core_busy", 100 * tr["gateway_cores_busy_s"] / tr["gateway_cores_s"],
                "%", "the gateway's CPUs (user + system + irq + softirq) over the transfers' time",
            ),
            records.measured(
                NAME, variant, "gateway_core_cpu", gwload.cpu_per_gbps(tr["gateway_cores_busy_s"], tr["bytes"]),
                "% core per Gbit/s", "busy time of the gateway's CPUs, kernel included, per Gbit/s moved",
            ),
        ]  # fmt: skip
    return out


def rate_records(mode: str, rate: dict[str, Any]) -> list[records.Record]:
    out = [
        records.measured(
            NAME, mode, "conn_rate", rate["rate_per_s"], "conn/s",
            (f"target through the splitter >= {TARGET_CONN_RATE:.0f}/s" if mode == "split" else "client ceiling")
            + ("; lower bound: the run hit rate_max_conns" if rate.get("capped") else ""),
        ),
        records.measured(NAME, mode, "conn_errors", rate["errors"], "conn"),
    ]  # fmt: skip
    if rate.get("latency_p99_us") is not None:
        out.append(
            records.measured(
                NAME, mode, "conn_latency_p99", rate["latency_p99_us"] / 1000, "ms",
                f"p50 {rate['latency_p50_us'] / 1000:.2f} ms; connect start → echo back, under full load",
            )
        )  # fmt: skip
    if mode == "split" and rate["completed"] > 0:
        out.append(
            records.measured(
                NAME, mode, "gateway_cpu_per_conn", 1e6 * rate["daemon_cpu_s"] / rate["completed"], "µs/conn",
                "daemon utime+stime over the rate run / connections completed",
            )
        )  # fmt: skip
    return out


def ratio_record(placement: str, transfers: dict[tuple[str, str], dict[str, Any]]) -> records.Record:
    metric = "throughput_ratio" if placement == "dedicated" else "throughput_ratio_shared"
    routed, split = (
        transfers.get((placement, "routed")),
        transfers.get((placement, "split")),
    )
    if routed is None or split is None:
        return records.missing(NAME, "split", metric, "x", "needs two CPUs at least")
    return records.measured(
        NAME, "split", metric, split["rate_Bps"] / routed["rate_Bps"], "x",
        "median split / median routed"
        + (f"; target >= {TARGET_RATIO}" if placement == "dedicated" else "; every CPU shared"),
    )  # fmt: skip


def idle_records(held: gwload.HeldFlows, wanted: int) -> list[records.Record]:
    variant = f"split-{wanted}-idle"
    n = int(held.client["held"])
    out = [
        records.measured(NAME, variant, "flows_held", n, "flows"),
        records.measured(NAME, variant, "flow_errors", held.client["errors"], "flows"),
    ]
    if "flows_live" in held.counters:
        out.append(
            records.measured(
                NAME,
                variant,
                "flows_live",
                held.counters["flows_live"],
                "flows",
                "gateway count",
            )
        )
    if held.plateau.fds:
        out.append(
            records.measured(
                NAME,
                variant,
                "fds_max_per_process",
                max(held.plateau.fds.values()),
                "fds",
            )
        )
    if n > 0:
        per_flow = gwload.bytes_per_flow(held.before.rss_total_kib, held.plateau.rss_total_kib, n) / 1024
        out.append(
            records.measured(
                NAME, variant, "idle_flow_rss", per_flow, "KiB/flow",
                f"daemon RSS growth / flows; target <= {TARGET_IDLE_KIB:.0f} KiB",
            )
        )  # fmt: skip
    else:
        out.append(records.missing(NAME, variant, "idle_flow_rss", "KiB/flow", "no flow could be opened"))
    return out


def run(ctx: Context, params: dict[str, Any]) -> list[records.Record]:
    out: list[records.Record] = []
    size, workers = int(params["size_bytes"]), int(params["workers"])
    # The hold must stay split, not overflow to routed.
    max_flows = 2 * int(params["idle_flows"])
    transfers: dict[tuple[str, str], dict[str, Any]] = {}
    with vethlab.path(lab.PREFIX) as vp:
        for placement in vethlab.placements().values():
            runs: dict[str, list[dict[str, Any]]] = {"routed": [], "split": []}
            vp.steer(placement)
            for i in range(int(params["reps"])):
                ctx.log(f"{NAME}: throughput, {placement.name} CPUs, repetition {i + 1}: routed, then split")
                runs["routed"].append(timed_download(vp, size, placement, None))
                with vethlab.gateway(vp, workers, max_flows, placement) as gw:
                    runs["split"].append(timed_download(vp, size, placement, gw.daemon))
            for mode, mode_runs in runs.items():
                transfers[(placement.name, mode)] = summarize(mode_runs)
                out += transfer_records(mode, placement.name, transfers[(placement.name, mode)])
        vp.steer(None)
        ctx.log(f"{NAME}: connection rate, routed")
        routed_rate = conn_rate(vp, params, None)
        out += rate_records("routed", routed_rate)
        with vethlab.gateway(vp, workers, max_flows) as gw:
            ctx.log(f"{NAME}: connection rate, split, daemon pids {gw.daemon.pids}")
            split_rate = conn_rate(vp, params, gw.daemon)
            out += rate_records("split", split_rate)
            ctx.log(f"{NAME}: {params['idle_flows']} idle flows")
            with gwload.echo_server(vp.exec_argv, vethlab.SERVER_V4, ECHO_PROCS):
                held = gwload.hold_flows(
                    vp.exec_argv,
                    vethlab.SERVER_V4,
                    int(params["idle_flows"]),
                    HOLD_PROCS,
                    gw.daemon,
                    gw.control_socket,
                )
            out += idle_records(held, int(params["idle_flows"]))
    out += [ratio_record("dedicated", transfers), ratio_record("shared", transfers)]
    if routed_rate["rate_per_s"] > 0:
        out.append(
            records.measured(
                NAME, "split", "conn_rate_ratio", split_rate["rate_per_s"] / routed_rate["rate_per_s"], "x",
                "split / routed with the same client",
            )
        )  # fmt: skip
    ctx.raw[NAME] = {
        "transfers": {f"{p}/{m}": t for (p, m), t in transfers.items()},
        "rate": {"routed": routed_rate, "split": split_rate},
        "idle": {"client": held.client, "counters": held.counters, "before": vars(held.before),
                 "plateau": vars(held.plateau)},
    }  # fmt: skip
    return out
