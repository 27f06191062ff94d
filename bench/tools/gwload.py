"""Load through a gateway, shared by the splitter-overhead and scale scenarios: an echo server,
a connection-rate run, N held idle flows with the daemon's RSS/fds before and at the plateau,
and the metric arithmetic (pure, unit-tested).
"""

from __future__ import annotations

import json
import os
import select
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from bench import procs
from bench.tools import gwproc
from perigee_control.client import GatewayClient, GatewayError

ECHO_PORT = 5302  # not satlab's :80 / :5001 servers nor the transfer port 5201
# Built by `make build` (gateway workspace, crate perigee-loadgen).
LOADGEN = procs.REPO / "gateway/target/release/perigee-loadgen"
ExecArgv = Callable[[str, list[str]], list[str]]  # (role, argv) -> argv run in that role's netns


def bytes_per_flow(before_kib: int, after_kib: int, flows: int) -> float:
    """RSS growth per flow in bytes; growth below zero (pages returned) counts as zero."""
    if flows <= 0:
        raise ValueError("no flows")
    return max(0, after_kib - before_kib) * 1024 / flows


def cpu_per_gbps(cpu_s: float, bytes_moved: int) -> float:
    """CPU cost of throughput: % of one core per Gbit/s = 100 x core-seconds per Gbit moved.

    (cpu_s / T) / (8 x bytes / T / 1e9): the wall time T cancels, so only the counts matter.
    """
    if bytes_moved <= 0:
        raise ValueError("nothing moved")
    return 100.0 * cpu_s / (bytes_moved * 8 / 1e9)


def read_json_line(bg: procs.Background, timeout: float) -> Any:
    """The first line a background tool prints, parsed; ToolError when it says nothing in time."""
    assert bg.proc.stdout is not None
    ready, _, _ = select.select([bg.proc.stdout], [], [], timeout)
    line = bg.proc.stdout.readline() if ready else ""
    if not line.strip():
        bg.close()
        raise procs.ToolError(f"{' '.join(bg.argv[-8:])}: no result in {timeout:.0f} s {bg.stderr_tail()}")
    return json.loads(line)


def loadgen_argv(*args: str) -> list[str]:
    """argv for the Rust load generator; ToolError when it is not built.

    The Python client tops out near 4,000 connections/s on two cores, below the 5,000/s target,
    so the rate and its echo server must come from the compiled tool: no Python fallback.
    """
    if not os.access(LOADGEN, os.X_OK):
        raise procs.ToolError(f"{LOADGEN} is not built; run 'make build' (or 'make -C gateway build')")
    return [str(LOADGEN), *args]


@contextmanager
def echo_server(exec_argv: ExecArgv, bind: str, threads: int, port: int = ECHO_PORT) -> Iterator[None]:
    """An echo server on `port` in the server namespace, one SO_REUSEPORT listener per thread."""
    argv = exec_argv(
        "server",
        loadgen_argv("echo", "--bind", bind, "--port", str(port), "--threads", str(threads)),
    )
    with procs.Background(argv) as srv:
        srv.wait_line("LISTENING", timeout=15)
        yield


def conn_rate(
    exec_argv: ExecArgv,
    server: str,
    threads: int,
    concurrency: int,
    duration_s: float,
    max_conns: int,
    port: int = ECHO_PORT,
) -> dict[str, Any]:
    """connect → 1-byte echo → close, as fast as `threads` x `concurrency` in flight allow.

    The result: completed (in the window), errors and error_kinds, unfinished, rate_per_s,
    latency_p50_us / latency_p99_us (connect start → echo back).
    """
    argv = exec_argv(
        "client",
        loadgen_argv(
            "rate", "--connect", server, "--port", str(port), "--threads", str(threads),
            "--concurrency", str(concurrency), "--duration", str(duration_s),
            "--max-conns", str(max_conns),
        ),
    )  # fmt: skip
    out = procs.run(argv, timeout=duration_s + 45)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@dataclass
class HeldFlows:
    client: dict[str, Any]  # the hold tool's summary: held, errors, open_all_s, ...
    before: gwproc.Snapshot  # the daemon idle, before any flow
    plateau: gwproc.Snapshot  # the daemon with every flow open and idle
    counters: dict[str, Any]  # /v1/counters at the plateau (empty without a control socket)


def hold_flows(
    exec_argv: ExecArgv,
    server: str,
    flows: int,
    processes: int,
    daemon: gwproc.Daemon,
    control_socket: str | None,
    settle_s: float = 1.5,
    open_timeout_s: float = 60.0,
) -> HeldFlows:
    """Open `flows` echo-checked connections from the client and hold them idle while we measure."""
    before = gwproc.snapshot(daemon.pids)
    argv = exec_argv(
        "client",
        procs.tool_argv(
            "bench.tools.connload", "hold", "--connect", server, "--port", str(ECHO_PORT),
            "--flows", str(flows), "--procs", str(processes), "--hold-s", str(open_timeout_s + 30),
        ),
    )  # fmt: skip
    with procs.Background(argv) as client:
        summary = read_json_line(client, open_timeout_s)
        time.sleep(settle_s)  # workers report to the master once a second: let the flow table catch up
        plateau = gwproc.snapshot(daemon.pids)
        counters: dict[str, Any] = {}
        if control_socket:
            try:
                counters = GatewayClient(control_socket).json.counters()
            except GatewayError as exc:
                counters = {"error": str(exc)}
    return HeldFlows(summary, before, plateau, counters)
