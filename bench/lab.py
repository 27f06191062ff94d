"""The benchmark's handle on satlab: bring a topology up under our own prefix, tune it, always take it down.

We drive satlab through its command line (bin/satlab) so the benchmark measures exactly what users run.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from bench import procs

SATLAB = str(procs.REPO / "bin/satlab")
PREFIX = os.environ.get("BENCH_PREFIX", "bn-")
# The gateway's default peer.port (satlab leaves it): with Perigee at both ends a flow's satellite
# leg at the hub is a peer-path connection accepted on it.
PEER_PORT = 7072
CLIENT_V4 = "10.71.1.10"
SERVER_V4 = "10.71.3.10"
CROSS_V4 = "10.71.4.10"  # the short-RTT host at the hub's terrestrial side
ENDLESS_BYTES = 1 << 40  # a flow bounded by time, not size
# Socket buffer ceilings large enough that no GEO BDP here (50 Mbit/s × 0.6 s = 3.75 MB, plus a
# 1-BDP queue) is ever window-limited; set in every namespace that terminates TCP.
BUFFER_MAX = 64 << 20
TCP_SYSCTLS = (
    f"net.core.rmem_max={BUFFER_MAX}",
    f"net.core.wmem_max={BUFFER_MAX}",
    f"net.ipv4.tcp_rmem=4096 131072 {BUFFER_MAX}",
    f"net.ipv4.tcp_wmem=4096 16384 {BUFFER_MAX}",
    # Each transfer must start cold: no ssthresh/RTT cached from the previous run to the same host.
    "net.ipv4.tcp_no_metrics_save=1",
)
TCP_ROLES = ("client", "server", "hub", "terminal")


class LabUnavailable(RuntimeError):
    """satlab (or the requested feature, e.g. the gateway) cannot run here; the variant is skipped."""


def satlab(*args: str, timeout: float = 120.0, check: bool = True, prefix: str = PREFIX) -> str:
    proc = procs.run([SATLAB, "--prefix", prefix, *args], timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise LabUnavailable(f"satlab {' '.join(args)}: {(proc.stderr or proc.stdout).strip()[-600:]}")
    return proc.stdout


@dataclass
class Lab:
    profile: str
    gateway: str | None = None
    overrides: list[str] = field(default_factory=list)
    # Scenarios that run several labs at once (slow links use little CPU) give each its own prefix.
    prefix: str = PREFIX

    def ns(self, role: str) -> str:
        return f"{self.prefix}{role}"

    def exec_argv(self, role: str, argv: list[str]) -> list[str]:
        return procs.in_netns(self.ns(role), argv)

    def tune_tcp(self) -> None:
        for role in TCP_ROLES:
            procs.run(self.exec_argv(role, ["sysctl", "-q", "-w", *TCP_SYSCTLS]), timeout=10)

    def flush_tcp_metrics(self) -> None:
        for role in TCP_ROLES:
            procs.run(
                self.exec_argv(role, ["ip", "tcp_metrics", "flush", "all"]),
                timeout=10,
                check=False,
            )

    def link_set(self, *args: str) -> None:
        satlab("link", "set", *args, timeout=20, prefix=self.prefix)

    def link_reset(self) -> None:
        """Zero the emulator's counters and lateness histogram."""
        satlab("link", "reset", timeout=20, prefix=self.prefix)

    def link_stats(self) -> dict[str, Any]:
        out = satlab("link", "stats", "--json", timeout=20, prefix=self.prefix)
        data: dict[str, Any] = json.loads(out)
        return data

    def forward_queue_bytes(self) -> int:
        """The satellite link's forward queue right now, asked of the emulator's control socket
        directly (cheap enough to sample every 100 ms, unlike a `satlab link stats` process)."""
        from satlab import linkctl
        from satlab.topology import SAT_LINK, Topology

        sock = Topology(prefix=self.prefix).path(f"{SAT_LINK.name}-link.sock")
        try:
            stats = linkctl.stats(sock)
        except (linkctl.LinkControlError, OSError, ValueError) as exc:
            raise LabUnavailable(f"link emulator stats: {exc}") from exc
        return int(stats[SAT_LINK.forward].get("queue_bytes", 0))

    def status(self) -> dict[str, Any]:
        out = satlab("status", "--json", timeout=20, check=False, prefix=self.prefix)
        try:
            data: dict[str, Any] = json.loads(out)
            return data
        except ValueError:
            return {"raw": out}

    def emulator_pids(self) -> list[int]:
        """Processes of the link emulator: those in the sat namespace whose program is satlab-link."""
        out = procs.run(["ip", "netns", "pids", self.ns("sat")], timeout=10, check=False).stdout
        pids = []
        for pid in (int(p) for p in out.split()):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"satlab-link" in f.read():
                        pids.append(pid)
            except OSError:
                continue
        return pids


def down(prefix: str = PREFIX) -> None:
    satlab("down", timeout=60, check=False, prefix=prefix)


@contextmanager
def running(
    profile: str,
    gateway: str | None = None,
    overrides: list[str] | None = None,
    prefix: str = PREFIX,
) -> Iterator[Lab]:
    """satlab up with our prefix; down on exit, whatever happened inside."""
    if not os.path.exists(SATLAB):
        raise LabUnavailable("bin/satlab not found")
    lab = Lab(profile, gateway, list(overrides or []), prefix)
    down(prefix)  # a previous interrupted run may have left our prefix behind
    args = ["up", "--profile", profile, *lab.overrides]
    if gateway:
        args += ["--gateway", gateway]
    try:
        satlab(*args, timeout=180, prefix=prefix)
        lab.tune_tcp()
        lab.flush_tcp_metrics()
        time.sleep(0.5)
        yield lab
    finally:
        down(prefix)


def cross_serve_argv(lb: Lab, port: int, cc: str, timeout: float) -> list[str]:
    """A bench.tools.flow source on the cross host sending until stopped, with congestion control cc."""
    return lb.exec_argv(
        "cross",
        procs.tool_argv(
            "bench.tools.flow",
            "serve",
            "--bind",
            CROSS_V4,
            "--port",
            str(port),
            "--cc",
            cc,
            "--bytes",
            str(ENDLESS_BYTES),
            "--timeout",
            str(timeout + 5),
        ),
    )


def cross_fetch_argv(lb: Lab, role: str, port: int, timeout: float) -> list[str]:
    """A bench.tools.flow sink in `role` reading from the cross host's source on `port`."""
    return lb.exec_argv(
        role,
        procs.tool_argv(
            "bench.tools.flow",
            "fetch",
            "--connect",
            CROSS_V4,
            "--port",
            str(port),
            "--bytes",
            str(ENDLESS_BYTES),
            "--timeout",
            str(timeout),
        ),
    )
