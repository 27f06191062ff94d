"""A hub cluster: connection rate and throughput with N = 1, 2, 3 gateways, and 1,000 flows pinned."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from bench import lab, procs, records
from bench.context import Context
from bench.lab import SERVER_V4
from bench.tools import gwload

NAME = "cluster"
KIND = "overhead"
TITLE = "Hub cluster: gateways behind ECMP"
DESCRIPTION = (
    "`satlab up --hub-gateways N --gateway hub` (docs/cluster.md): N gateways between a satellite-side and "
    "an internet-side router that spread flows over them with the kernel's symmetric, seeded multipath "
    "hash and one bucket table programmed identically on both (BGP and BFD from FRR). Per N (1, 2, 3), on "
    "a fat emulated link (`rate_profile`, rates and RTT below) so the link is not what limits: `conn_rate` "
    "(connect → 1-byte echo → close, perigee-loadgen, as `scale`) and `throughput` (`bulk_flows` "
    "concurrent downloads of `bulk_bytes` each through the cluster, bytes over the wall time from the "
    "first connect to the last byte). On this machine's 2 shared cores they cannot scale: every gateway, "
    "both routers, the link emulator (one userspace process carrying every packet), client and server "
    "share the same two cores, so adding a gateway adds work (one more daemon, more BGP/BFD) and no "
    "CPU; the figures show the cluster's overhead, not its capacity (capacity per gateway: `scale` and "
    "`splitter-overhead`; sizing in docs/operations.md, *Scaling out*). `pinned/N3` on geo-hts: "
    "`flows` concurrent checked downloads (sha256 of 16 KiB each) through 3 gateways; `flows_ok`, "
    "`flows_reset`, and `flows_pinned`: flows found in exactly one gateway's flow table, the gateway both "
    "routers' kernels choose for the flow's two directions; `flows_per_gateway` the spread; "
    "`bucket_moves` (the controller's table changes during the run) and `guard_resets` (packets the "
    "gateways' guards answered with a reset) are 0 when no gateway was taken for dead while serving "
    "(the routers are asked after the run, so a move would also make `flows_pinned` undercount)."
)
PARAMS: dict[str, dict[str, Any]] = {
    "quick": {
        "gateways": [1, 3],
        "rate_profile": [
            "--rtt",
            "10",
            "--fwd-rate",
            "2G",
            "--ret-rate",
            "2G",
            "--buffer",
            "8MB",
        ],
        "rate_duration_s": 2.0,
        "rate_procs": 2,
        "rate_concurrency": 128,
        "rate_max_conns": 40_000,
        "bulk_flows": 8,
        "bulk_bytes": 8_000_000,
        "flows": 300,
    },
    "full": {
        "gateways": [1, 2, 3],
        "rate_profile": [
            "--rtt",
            "10",
            "--fwd-rate",
            "2G",
            "--ret-rate",
            "2G",
            "--buffer",
            "8MB",
        ],
        "rate_duration_s": 4.0,
        "rate_procs": 2,
        "rate_concurrency": 128,
        "rate_max_conns": 80_000,
        "bulk_flows": 8,
        "bulk_bytes": 25_000_000,
        "flows": 1000,
    },
}
FLOW_SIZE = 16384


def flowcheck_argv(lb: lab.Lab, *args: str) -> list[str]:
    return lb.exec_argv(
        "client",
        [
            procs.PYTHON,
            "-m",
            "satlab.cluster.flowcheck",
            "--server",
            SERVER_V4,
            *args,
        ],
    )


def run_flows(lb: lab.Lab, *args: str, timeout: float = 300) -> dict[str, Any]:
    out = procs.run(flowcheck_argv(lb, *args), timeout=timeout)
    data: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return data


def run_path(lb: lab.Lab, name: str) -> str:
    """A file of the lab's run directory (satlab's own layout)."""
    from satlab.topology import Topology

    return str(Topology(prefix=lb.prefix).path(name))


def gateway_flows(lb: lab.Lab, role: str) -> list[dict[str, Any]]:
    sock = run_path(lb, f"gw-{lb.ns(role)}.sock")
    out = procs.run(
        [
            str(procs.REPO / "bin/perigee"),
            "flows",
            "--json",
            "--state",
            "all",
            "--control-socket",
            sock,
        ],
        timeout=30,
    )
    data: list[dict[str, Any]] = json.loads(out.stdout)["flows"]
    return data


def bucket_moves(lb: lab.Lab) -> int:
    """Buckets the cluster controller has moved since it started (its status file)."""
    with open(run_path(lb, "controller.json")) as f:
        return int(json.load(f).get("moves_total", 0))


def guard_resets(lb: lab.Lab, role: str) -> int:
    """Packets a gateway's cluster guard answered with a reset (not its flow: docs/cluster.md)."""
    out = procs.run(
        lb.exec_argv(role, ["nft", "-j", "list", "counters", "table", "inet", "perigee_cluster"]),
        timeout=10,
    )
    for o in json.loads(out.stdout)["nftables"]:
        if o.get("counter", {}).get("name") == "reset_foreign":
            return int(o["counter"]["packets"])
    return 0


def route_dev(lb: lab.Lab, role: str, src: str, dst: str, sport: int, dport: int, iif: str) -> str:
    out = procs.run(
        [
            "ip",
            "-n",
            lb.ns(role),
            "-j",
            "route",
            "get",
            dst,
            "from",
            src,
            "iif",
            iif,
            "ipproto",
            "tcp",
            "sport",
            str(sport),
            "dport",
            str(dport),
        ],
        timeout=10,
    )
    return str(json.loads(out.stdout)[0]["dev"])


def capacity(ctx: Context, n: int, params: dict[str, Any]) -> list[records.Record]:
    variant = f"N{n}"
    out: list[records.Record] = []
    overrides = [*params["rate_profile"], "--hub-gateways", str(n)]
    with lab.running("leo", gateway="hub", overrides=overrides) as lb:
        for role in ("client", *(f"gw{k}" for k in range(1, n + 1))):
            procs.run(
                lb.exec_argv(
                    role,
                    [
                        "sysctl",
                        "-qw",
                        "net.ipv4.ip_local_port_range=10000 65000",
                        "net.ipv4.tcp_tw_reuse=1",
                    ],
                ),
                timeout=10,
            )
        with gwload.echo_server(lb.exec_argv, SERVER_V4, 2):
            rate = gwload.conn_rate(
                lb.exec_argv,
                SERVER_V4,
                params["rate_procs"],
                params["rate_concurrency"],
                params["rate_duration_s"],
                params["rate_max_conns"],
            )
        ctx.log(f"{NAME} {variant}: {rate['rate_per_s']:.0f} conn/s")
        out += [
            records.measured(
                NAME,
                variant,
                "conn_rate",
                rate["rate_per_s"],
                "conn/s",
                "lower bound: hit rate_max_conns" if rate.get("capped") else "",
            ),
            records.measured(
                NAME,
                variant,
                "conn_errors",
                rate["errors"],
                "conn",
                ", ".join(f"{k}: {v}" for k, v in rate["error_kinds"].items()),
            ),
        ]
        bulk = run_flows(
            lb,
            "--flows",
            str(params["bulk_flows"]),
            "--size",
            str(params["bulk_bytes"]),
        )
        got = sum(int(r["bytes"]) for r in bulk["flows"])
        wall = max(r["t_end"] for r in bulk["flows"]) - min(r["t_start"] for r in bulk["flows"])
        ok = bulk["summary"].get("ok", 0)
        out.append(
            records.measured(
                NAME,
                variant,
                "throughput",
                got * 8 / wall / 1e6 if wall > 0 else 0.0,
                "Mbit/s",
                f"{ok} of {params['bulk_flows']} downloads complete and correct",
            )
        )
        ctx.raw.setdefault(NAME, {})[variant] = {
            "rate": rate,
            "bulk_summary": bulk["summary"],
        }
    return out


def pinning(ctx: Context, params: dict[str, Any]) -> list[records.Record]:
    variant = "pinned/N3"
    flows = int(params["flows"])
    gateways = ("gw1", "gw2", "gw3")
    with lab.running("geo-hts", gateway="hub", overrides=["--hub-gateways", "3"]) as lb:
        moves0 = bucket_moves(lb)
        resets0 = sum(guard_resets(lb, g) for g in gateways)
        run = run_flows(lb, "--flows", str(flows), "--size", str(FLOW_SIZE), "--stall", "60")
        tables: dict[int, list[str]] = {}
        time.sleep(1.5)  # the gateways' workers report their flows once a second
        moves = bucket_moves(lb) - moves0
        resets = sum(guard_resets(lb, g) for g in gateways) - resets0
        for role in gateways:
            for f in gateway_flows(lb, role):
                if f["client"].startswith("10.71.1.10:") and f["started_at"] >= run["t_start"] - 0.5:
                    tables.setdefault(int(f["client"].rsplit(":", 1)[1]), []).append(role)
        per_gw: dict[str, int] = {}
        pinned = 0
        for r in run["flows"]:
            held = tables.get(r["sport"], [])
            if len(held) == 1 and r["result"] == "ok":
                there = route_dev(lb, "hub", "10.71.1.10", SERVER_V4, r["sport"], 5001, "sat0")
                back = route_dev(lb, "edge", SERVER_V4, "10.71.1.10", 5001, r["sport"], "lan0")
                if there == back == held[0]:
                    pinned += 1
                    per_gw[held[0]] = per_gw.get(held[0], 0) + 1
        summary = run["summary"]
        ctx.raw.setdefault(NAME, {})[variant] = {
            "summary": summary,
            "per_gateway": per_gw,
            "bucket_moves": moves,
            "guard_resets": resets,
        }
        return [
            records.measured(
                NAME,
                variant,
                "flows_ok",
                summary.get("ok", 0),
                "flows",
                f"of {flows}, sha256 checked",
            ),
            records.measured(NAME, variant, "flows_reset", summary.get("reset", 0), "flows"),
            records.measured(
                NAME,
                variant,
                "flows_pinned",
                pinned,
                "flows",
                "in exactly one gateway's table, the one both routers choose both ways",
            ),
            records.measured(
                NAME,
                variant,
                "flows_per_gateway_min",
                min(per_gw.values()) if per_gw else 0,
                "flows",
                ", ".join(f"{g}: {n}" for g, n in sorted(per_gw.items())),
            ),
            records.measured(
                NAME,
                variant,
                "bucket_moves",
                moves,
                "buckets",
                "the controller's table changes while the flows ran",
            ),
            records.measured(
                NAME,
                variant,
                "guard_resets",
                resets,
                "packets",
                "answered with a reset by a gateway that does not hold the flow",
            ),
        ]


def run(ctx: Context, params: dict[str, Any]) -> list[records.Record]:
    if os.geteuid() != 0:
        return [records.skipped(NAME, "all", "needs root (network namespaces)")]
    out: list[records.Record] = []
    for n in params["gateways"]:
        try:
            out += capacity(ctx, n, params)
        except (lab.LabUnavailable, procs.ToolError) as e:
            out.append(records.skipped(NAME, f"N{n}", str(e)[:300]))
    try:
        out += pinning(ctx, params)
    except (lab.LabUnavailable, procs.ToolError) as e:
        out.append(records.skipped(NAME, "pinned/N3", str(e)[:300]))
    return out
