"""Can the userspace link emulator carry 100 Mbit/s of full-size frames on time, and is it idle when idle?"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from bench import lab, procs, records
from bench.context import Context
from bench.lab import CLIENT_V4
from bench.tools import cpu

NAME = "emulator"
KIND = "emulator"
TITLE = "Link emulator capacity and timing"
DESCRIPTION = (
    "A paced UDP source in the server namespace sends 1500-byte Ethernet frames (1486-byte IP packets) at 100 Mbit/s "
    "through the "
    "`leo` profile (100 Mbit/s, 15 ms each way) to a sink in the client namespace. We report the rate "
    "that arrived, the loss, the emulator's own lateness (how late it released packets against their "
    "schedule, from `satlab link stats --json`) and the emulator's CPU while idle for 10 s "
    "(utime+stime from /proc/<pid>/stat, % of one core)."
)
PARAMS: dict[str, dict[str, Any]] = {
    "quick": {"profile": "leo", "rate_bps": 100e6, "duration_s": 5.0, "idle_s": 10.0},
    "full": {"profile": "leo", "rate_bps": 100e6, "duration_s": 20.0, "idle_s": 10.0},
}
UDP_PORT = 5301
ETHERNET_HEADER = 14  # the emulator counts (and paces) whole Ethernet frames
FRAME_BYTES = 1500
UDP_PAYLOAD = FRAME_BYTES - ETHERNET_HEADER - 28


def _lateness(stats: Any) -> dict[str, float]:
    """Find the forward direction's lateness figures wherever satlab puts them (µs)."""
    found: dict[str, float] = {}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{path}.{key}" if path else str(key))
        elif isinstance(node, (int, float)) and "late" in path.lower():
            found[path] = float(node)

    walk(stats, "")
    return found


def run(ctx: Context, params: dict[str, Any]) -> list[records.Record]:
    out: list[records.Record] = []
    with lab.running(params["profile"]) as lb:
        pids = lb.emulator_pids()
        if pids:
            idle = cpu.cpu_percent_over(pids, params["idle_s"])
            out.append(records.measured(NAME, "idle", "emulator_cpu", idle, "% of a core"))
        else:
            out.append(
                records.missing(
                    NAME,
                    "idle",
                    "emulator_cpu",
                    "% of a core",
                    "no satlab-link process found",
                )
            )
        sink_argv = lb.exec_argv(
            "client",
            procs.tool_argv(
                "bench.tools.udp",
                "sink",
                "--port",
                str(UDP_PORT),
                "--timeout",
                str(params["duration_s"] + 30),
            ),
        )
        blast_argv = lb.exec_argv(
            "server",
            procs.tool_argv(
                "bench.tools.udp",
                "blast",
                "--to",
                CLIENT_V4,
                "--port",
                str(UDP_PORT),
                "--rate-bps",
                str(params["rate_bps"]),
                "--size",
                str(UDP_PAYLOAD),
                "--l2-overhead",
                str(ETHERNET_HEADER),
                "--duration",
                str(params["duration_s"]),
            ),
        )
        lb.link_reset()
        busy_before = sum(cpu.cpu_ticks(p) for p in pids) if pids else 0
        t_busy = time.monotonic()
        with procs.Background(sink_argv) as sink:
            sink.wait_line("LISTENING", timeout=15)
            sent = procs.run(blast_argv, timeout=params["duration_s"] + 30)
            got = sink.result(timeout=params["duration_s"] + 35)
        blasted = json.loads(sent.stdout.strip().splitlines()[-1])
        busy_after = sum(cpu.cpu_ticks(p) for p in pids) if pids else 0
        busy_s = time.monotonic() - t_busy
        stats = lb.link_stats()
        ctx.raw[NAME] = {"blast": blasted, "sink": got, "link_stats": stats}
        variant = f"udp-{params['rate_bps'] / 1e6:.0f}M"
        offered = blasted["packets"] * blasted["frame_bytes"] * 8 / (blasted["t_end"] - blasted["t_start"])
        out.append(records.measured(NAME, variant, "offered_rate", offered / 1e6, "Mbit/s"))
        if got["packets"] > 1:
            achieved = (got["ip_bytes"] + ETHERNET_HEADER * got["packets"]) * 8 / (got["t_last"] - got["t_first"])
            out.append(records.measured(NAME, variant, "achieved_rate", achieved / 1e6, "Mbit/s"))
        out.append(
            records.measured(
                NAME,
                variant,
                "loss",
                100.0 * (1 - got["packets"] / max(1, blasted["packets"])),
                "%",
            )
        )
        if pids:
            hz = os.sysconf("SC_CLK_TCK")
            out.append(
                records.measured(
                    NAME,
                    variant,
                    "emulator_cpu",
                    100.0 * (busy_after - busy_before) / hz / busy_s,
                    "% of a core",
                    "over the whole blast, incl. the sink's idle timeout",
                )
            )
        late = _lateness(stats)
        picked = pick_lateness(late)
        for metric, value in picked.items():
            out.append(records.measured(NAME, variant, metric, value, "µs"))
        if not picked:
            out.append(
                records.missing(
                    NAME,
                    variant,
                    "lateness_p99",
                    "µs",
                    "satlab link stats has no lateness figures",
                )
            )
    return out


def pick_lateness(found: dict[str, float]) -> dict[str, float]:
    """Forward-direction p50/p99/max lateness in µs from satlab's stats keys."""
    picked: dict[str, float] = {}
    for path, value in found.items():
        low = path.lower()
        if "ret" in low.split(".")[0] or "return" in low:
            continue
        scale = 1000.0 if low.endswith("_ms") else (0.001 if low.endswith("_ns") else 1.0)
        for tag in ("p50", "p99", "max"):
            if low.endswith(tag) or f"_{tag}_" in low or f".{tag}" in low:
                picked.setdefault(f"lateness_{tag}", value * scale)
    return picked
