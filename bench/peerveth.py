"""A zero-delay, unshaped path with a gateway at each end, for the peer path's cost: client --
terminal -- hub -- server over plain veth pairs (no link emulator), namespaces named with the bench
prefix. `gateways(binary)` starts `perigee gateway run` in the terminal and the hub with the peer
path on (each with its own identity, the hub enrolling the terminal), from `binary`: the shipped
daemon (TLS) or `perigee-plaintext` (the benchmark-only build without it).
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
from typing import Any

from bench import procs, vethlab
from bench.lab import PREFIX, TCP_SYSCTLS, LabUnavailable
from bench.tools import gwproc
from perigee_control.client import GatewayClient

CLIENT_V4, TERMINAL_LAN_V4 = "10.98.1.10", "10.98.1.1"
TERMINAL_SAT_V4, HUB_SAT_V4 = "10.98.2.1", "10.98.2.2"
HUB_LAN_V4, SERVER_V4 = "10.98.3.1", "10.98.3.10"
CLIENT_SUBNET, SERVER_SUBNET = "10.98.1.0/24", "10.98.3.0/24"
ROLES = ("client", "terminal", "hub", "server")


def _sh(*argv: str) -> None:
    procs.run(list(argv), timeout=20)


@dataclass(frozen=True)
class PeerVethPath:
    prefix: str

    def ns(self, role: str) -> str:
        return f"{self.prefix}pv-{role}"

    def exec_argv(self, role: str, argv: list[str]) -> list[str]:
        return procs.in_netns(self.ns(role), argv)

    def up(self) -> None:
        self.down()
        c, t, h, s = (self.ns(r) for r in ROLES)
        for ns in (c, t, h, s):
            _sh("ip", "netns", "add", ns)
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
        _sh("ip", "-n", c, "link", "add", "eth0", "type", "veth", "peer", "name", "lan0", "netns", t)
        _sh("ip", "-n", t, "link", "add", "sat0", "type", "veth", "peer", "name", "sat0", "netns", h)
        _sh("ip", "-n", s, "link", "add", "eth0", "type", "veth", "peer", "name", "lan0", "netns", h)
        for ns, dev, addr in (
            (c, "eth0", f"{CLIENT_V4}/24"),
            (t, "lan0", f"{TERMINAL_LAN_V4}/24"),
            (t, "sat0", f"{TERMINAL_SAT_V4}/24"),
            (h, "sat0", f"{HUB_SAT_V4}/24"),
            (h, "lan0", f"{HUB_LAN_V4}/24"),
            (s, "eth0", f"{SERVER_V4}/24"),
        ):
            _sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
            _sh("ip", "-n", ns, "link", "set", dev, "up")
        _sh("ip", "-n", c, "route", "add", "default", "via", TERMINAL_LAN_V4)
        _sh("ip", "-n", s, "route", "add", "default", "via", HUB_LAN_V4)
        _sh("ip", "-n", t, "route", "add", SERVER_SUBNET, "via", HUB_SAT_V4)
        _sh("ip", "-n", h, "route", "add", CLIENT_SUBNET, "via", TERMINAL_SAT_V4)
        for role in ROLES:
            _sh(*self.exec_argv(role, ["sysctl", "-qw", *TCP_SYSCTLS]))
        for role in ("terminal", "hub"):
            _sh(*self.exec_argv(role, ["sysctl", "-qw", "net.ipv4.ip_forward=1"]))

    def down(self) -> None:
        for role in ROLES:
            procs.run(["ip", "netns", "del", self.ns(role)], timeout=20, check=False)


@contextmanager
def path(prefix: str = PREFIX) -> Iterator[PeerVethPath]:
    """The four namespaces, removed on exit whatever happened."""
    with vethlab.brought_up(PeerVethPath(prefix), "peer veth path") as vp:
        yield vp


def config(role: str, pins: dict[str, str]) -> dict[str, Any]:
    """Plain cubic and kernel buffers on every leg (what the overhead scenario runs), the peer path on."""
    sat_route = (
        {"dst": SERVER_SUBNET, "via": HUB_SAT_V4}
        if role == "terminal"
        else {"dst": CLIENT_SUBNET, "via": TERMINAL_SAT_V4}
    )
    peer: dict[str, Any] = {"enabled": True, "pool_size": 4}
    if role == "terminal":
        peer.update(hub=HUB_SAT_V4, hub_fingerprints=[pins["hub"]])
    else:
        peer["terminals"] = [{"name": "veth", "fingerprints": [pins["terminal"]], "prefixes": [CLIENT_SUBNET]}]
    return {
        "schema": 1,
        "revision": f"bench-peer-veth-{role}",
        "role": role,
        "interfaces": {"lan": ["lan0"], "satellite": "sat0"},
        "served_subnets": [CLIENT_SUBNET],
        "satellite": {"congestion_control": "cubic", "sndbuf_bytes": 0, "rcvbuf_bytes": 0, "routes": [sat_route]},
        "terrestrial": {"congestion_control": "cubic"},
        "peer": peer,
        "sysctls": {"net.ipv4.tcp_slow_start_after_idle": "0"},
    }


@dataclass(frozen=True)
class Gateways:
    sockets: dict[str, str]
    daemons: dict[str, gwproc.Daemon]


def _identity(binary: str, state_dir: str) -> str:
    out = procs.run([binary, "identity", "init", "--state-dir", state_dir], timeout=30)
    return str(json.loads(out.stdout)["fingerprint"])


@contextmanager
def gateways(vp: PeerVethPath, binary: str, workers: int) -> Iterator[Gateways]:
    """Both daemons from `binary`, the terminal's pool full, until exit (SIGTERM)."""
    tmp = tempfile.mkdtemp(prefix=f"{vp.prefix}pv-")
    pins = {role: _identity(binary, f"{tmp}/peer-{role}") for role in ("hub", "terminal")}
    running: list[subprocess.Popen[bytes]] = []
    sockets: dict[str, str] = {}
    try:
        for role in ("hub", "terminal"):
            cfg, sock, log = f"{tmp}/{role}.json", f"{tmp}/{role}.sock", f"{tmp}/{role}.log"
            Path(cfg).write_text(json.dumps(config(role, pins)))
            argv = [
                "nsenter",
                f"--net=/run/netns/{vp.ns(role)}",
                "--",
                binary,
                "gateway",
                "run",
                "--config",
                cfg,
                "--control-socket",
                sock,
                "--workers",
                str(workers),
                "--metrics",
                "off",
                "--peer-state-dir",
                f"{tmp}/peer-{role}",
                "--squid-state-dir",
                f"{tmp}/squid-{role}",
                "--dns-state-dir",
                f"{tmp}/dns-{role}",
            ]
            with open(log, "ab") as logf:
                running.append(
                    subprocess.Popen(
                        argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True
                    )
                )
            vethlab.wait_workers(running[-1], sock, log, workers)
            sockets[role] = sock
        deadline = time.monotonic() + 20
        while (
            GatewayClient(sockets["terminal"], timeout_s=2).exchange("GET", "/v1/peer").body["pool"]["ready"]
            < workers * 4
        ):
            if time.monotonic() > deadline:
                raise LabUnavailable("the terminal's peer pool did not fill on the veth path")
            time.sleep(0.1)
        yield Gateways(sockets, {r: gwproc.find(vp.ns(r)) for r in ("terminal", "hub")})
    finally:
        for proc in reversed(running):
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
        subprocess.run(["rm", "-rf", tmp], check=False)
