"""A zero-delay, unshaped path for overhead measurements: client -- gateway -- server over plain
veth pairs (no link emulator, no qdisc limits), namespaces named with the bench prefix.

satlab always puts its userspace emulator in the path, which would cap and tax every number here,
so the overhead scenario builds this instead. The gateway namespace forwards (routed baseline);
`gateway()` starts `perigee gateway run` there so the same path becomes split.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from bench import procs
from bench.lab import PREFIX, TCP_SYSCTLS, LabUnavailable
from bench.tools import gwproc
from perigee_control.client import GatewayClient, GatewayError

PERIGEE = str(procs.REPO / "bin/perigee")
CLIENT_V4, GATEWAY_LAN_V4, GATEWAY_SRV_V4, SERVER_V4 = (
    "10.97.1.10",
    "10.97.1.1",
    "10.97.2.1",
    "10.97.2.10",
)
CLIENT_SUBNET = "10.97.1.0/24"
# Enough client ports for tens of thousands of connections to one server port.
PORT_RANGE = "net.ipv4.ip_local_port_range=10000 65000"
# The connection-rate runs close tens of thousands of connections a second: without reuse every
# port sits 60 s in TIME_WAIT (client side; the splitter's server leg in the gateway namespace),
# and the run would end on EADDRNOTAVAIL. With it a port is reusable after 1 s (timestamps on).
TW_REUSE = "net.ipv4.tcp_tw_reuse=1"


def _sh(*argv: str) -> None:
    procs.run(list(argv), timeout=20)


@dataclass(frozen=True)
class Placement:
    """Which CPUs run the end hosts (their processes and their veths' receive work) and which the
    gateway (its daemon and its veths' receive work, where routed forwarding runs too)."""

    name: str
    endpoint_cpus: frozenset[int]
    gateway_cpus: frozenset[int]

    def pin(self, role: str, argv: list[str]) -> list[str]:
        """argv run on the role's CPUs (taskset execs it, so its children inherit the set)."""
        cpus = self.gateway_cpus if role == "gw" else self.endpoint_cpus
        return ["taskset", "-c", ",".join(str(c) for c in sorted(cpus)), *argv]


def placements(cpu_count: int | None = None) -> dict[str, Placement]:
    """`shared`: every CPU runs everything (one box holds client, server and gateway).
    `dedicated`: CPU 0 for both end hosts, the others for the gateway, as when the gateway is its
    own machine; needs two CPUs at least."""
    n = cpu_count or os.cpu_count() or 1
    every = frozenset(range(n))
    out = {"shared": Placement("shared", every, every)}
    if n >= 2:
        out["dedicated"] = Placement("dedicated", frozenset({0}), frozenset(range(1, n)))
    return out


def cpu_mask(cpus: frozenset[int]) -> str:
    """The hex mask sysfs takes for a CPU set ("0" for none)."""
    return format(sum(1 << c for c in cpus), "x")


@dataclass(frozen=True)
class VethPath:
    prefix: str

    def ns(self, role: str) -> str:
        return f"{self.prefix}ovh-{role}"

    def exec_argv(self, role: str, argv: list[str]) -> list[str]:
        return procs.in_netns(self.ns(role), argv)

    def up(self) -> None:
        self.down()
        c, g, s = self.ns("client"), self.ns("gw"), self.ns("server")
        for ns in (c, g, s):
            _sh("ip", "netns", "add", ns)
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
        # One veth pair per side: eth0 in the end host, its peer (lan0 / sat0) in the gateway.
        for host, peer in ((c, "lan0"), (s, "sat0")):
            pair = f"link add eth0 type veth peer name {peer} netns {g}".split()
            _sh("ip", "-n", host, *pair)
        for ns, dev, addr in (
            (c, "eth0", f"{CLIENT_V4}/24"),
            (g, "lan0", f"{GATEWAY_LAN_V4}/24"),
            (g, "sat0", f"{GATEWAY_SRV_V4}/24"),
            (s, "eth0", f"{SERVER_V4}/24"),
        ):
            _sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
            _sh("ip", "-n", ns, "link", "set", dev, "up")
        _sh("ip", "-n", c, "route", "add", "default", "via", GATEWAY_LAN_V4)
        _sh("ip", "-n", s, "route", "add", "default", "via", GATEWAY_SRV_V4)
        _sh(*self.exec_argv("gw", ["sysctl", "-qw", "net.ipv4.ip_forward=1"]))
        for role in ("client", "gw", "server"):
            _sh(*self.exec_argv(role, ["sysctl", "-qw", *TCP_SYSCTLS, PORT_RANGE, TW_REUSE]))

    def steer(self, placement: Placement | None) -> None:
        """Receive flow steering (RPS) on each veth: the end hosts' receive queues to the
        placement's endpoint CPUs, the gateway's to its gateway CPUs; None turns it off.

        A veth hands TCP segments to the per-CPU backlog of whichever CPU transmitted them, and a
        socket transmits both from its process and from the softirq that takes its ACKs: without
        flow steering, consecutive segments of one bulk flow sit in two CPUs' backlogs and arrive
        reordered (measured: thousands of out-of-order packets and spurious retransmissions per
        second on each TCP hop). Real NICs deliver a flow in order. The steering IPIs cost about
        30% of the connection rate, routed and split alike, where there is nothing to reorder, so
        the overhead scenario steers bulk transfers only.
        """
        c, g, s = self.ns("client"), self.ns("gw"), self.ns("server")
        for ns, dev, cpus in (
            (c, "eth0", placement.endpoint_cpus if placement else frozenset()),
            (g, "lan0", placement.gateway_cpus if placement else frozenset()),
            (g, "sat0", placement.gateway_cpus if placement else frozenset()),
            (s, "eth0", placement.endpoint_cpus if placement else frozenset()),
        ):
            self._set_rps(ns, dev, cpu_mask(cpus))

    def _set_rps(self, ns: str, dev: str, mask: str) -> None:
        rps = f"/sys/class/net/{dev}/queues/rx-0/rps_cpus"
        # `ip netns exec` mounts the namespace's own /sys; tee writes its stdin there.
        argv = procs.in_netns(ns, ["tee", rps])
        done = subprocess.run(argv, check=False, input=mask, text=True, capture_output=True, timeout=20)
        if done.returncode != 0:
            raise procs.ToolError(f"{' '.join(argv)}: {done.stderr.strip()}")

    def down(self) -> None:
        for role in ("client", "gw", "server"):
            procs.run(["ip", "netns", "del", self.ns(role)], timeout=20, check=False)


class Topology(Protocol):
    def up(self) -> None: ...
    def down(self) -> None: ...


T = TypeVar("T", bound=Topology)


@contextmanager
def brought_up(topo: T, what: str) -> Iterator[T]:
    """`topo` up, removed on exit whatever happened; a failed `up` is LabUnavailable naming `what`."""
    try:
        topo.up()
    except procs.ToolError as exc:
        topo.down()
        raise LabUnavailable(f"{what}: {exc}") from exc
    try:
        yield topo
    finally:
        topo.down()


@contextmanager
def path(prefix: str = PREFIX) -> Iterator[VethPath]:
    """The three namespaces, removed on exit whatever happened."""
    with brought_up(VethPath(prefix), "veth path") as vp:
        yield vp


def gateway_config(max_flows: int) -> dict[str, object]:
    """A terminal-role splitter for everything from the client subnet; plain cubic, kernel buffers.

    Both legs run cubic like the endpoints: left to the namespace default, the LAN leg would run
    the host's default (bbr on some machines paces one veth flow at its own bandwidth estimate).
    """
    return {
        "schema": 1,
        "revision": "bench-overhead",
        "role": "terminal",
        "interfaces": {"lan": ["lan0"], "satellite": "sat0"},
        "served_subnets": [CLIENT_SUBNET],
        "splitter": {"max_flows": max_flows},
        "satellite": {
            "congestion_control": "cubic",
            "sndbuf_bytes": 0,
            "rcvbuf_bytes": 0,
        },
        "terrestrial": {"congestion_control": "cubic"},
    }


@dataclass(frozen=True)
class RunningGateway:
    control_socket: str
    daemon: gwproc.Daemon


def wait_workers(proc: subprocess.Popen[bytes], sock: str, log: str, workers: int) -> None:
    """Until the daemon on `sock` reports `workers` workers alive (30 s at most)."""
    deadline = time.monotonic() + 30
    while True:
        if proc.poll() is not None:
            raise LabUnavailable(f"gateway exited {proc.returncode}: {Path(log).read_text()[-600:]}")
        try:
            health = GatewayClient(sock, timeout_s=1).health()
            if sum(w.alive for w in health.workers) == workers:
                return
        except GatewayError:
            pass
        if time.monotonic() > deadline:
            raise LabUnavailable("gateway did not report its workers alive within 30 s")
        time.sleep(0.05)


@contextmanager
def gateway(vp: VethPath, workers: int, max_flows: int, placement: Placement | None = None) -> Iterator[RunningGateway]:
    """`perigee gateway run` in the gateway namespace until exit (SIGTERM: it removes its rules),
    on the placement's gateway CPUs when one is given."""
    tmp = tempfile.mkdtemp(prefix=f"{vp.prefix}ovh-")
    cfg, sock, log = f"{tmp}/gw.json", f"{tmp}/gw.sock", f"{tmp}/gw.log"
    Path(cfg).write_text(json.dumps(gateway_config(max_flows)))
    argv = [
        "nsenter", f"--net=/run/netns/{vp.ns('gw')}", "--", PERIGEE, "gateway", "run",
        "--config", cfg, "--control-socket", sock, "--workers", str(workers), "--metrics", "off",
    ]  # fmt: skip
    if placement is not None:
        argv = placement.pin("gw", argv)
    with open(log, "ab") as logf:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_workers(proc, sock, log, workers)
        daemon = gwproc.find(vp.ns("gw"))
        yield RunningGateway(sock, daemon)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        for name in ("gw.json", "gw.sock", "gw.log"):
            try:
                os.unlink(f"{tmp}/{name}")
            except FileNotFoundError:
                pass
        os.rmdir(tmp)
