"""FRR in the cluster's namespaces: each router and gateway runs its own zebra, bgpd and bfdd with its
own config and runtime directory (`<run_dir>/frr-<role>/`), never the system's `frr` service.

BGP design (docs/cluster.md):
- the hub router (AS 65001) originates the client subnet, the edge router (AS 65002) the server and
  cross subnets; each gateway (AS 65100, all alike) peers with both and passes each side's routes to
  the other with itself as next hop, so each router learns the far side once per gateway, as
  equal-cost paths;
- every gateway link has BFD (200 ms x 4): the cluster controller takes a gateway whose BFD is down off
  both routers at once, 0.8 s after its last packet;
- a gateway whose splitter is not serving shuts its BGP sessions (`announcer.py`): the routers drop its
  paths on the NOTIFICATION, and the controller gives its buckets to the others; when no gateway is up
  the controller keeps the last table, so the cluster fails open as a whole (the gateways forward unsplit);
- a draining gateway sends its routes with the GRACEFUL_SHUTDOWN community (RFC 8326, FRR's
  `bgp graceful-shutdown`); the routers give them local preference 0, keeping the paths but taking
  them out of the equal-cost set (the controller keeps the gateway's busy buckets until they are idle).
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import time
from pathlib import Path
from typing import Any

from .. import procs
from ..sysrun import run
from ..topology import EDGE_ROLE, Paths, Topology
from .plan import (
    CLIENT_PREFIXES,
    EDGE_ASN,
    GATEWAY_ASN,
    HUB_ASN,
    SERVER_PREFIXES,
    Member,
    members,
)

FRR_DIR = Path(os.environ.get("SATLAB_FRR_DIR", "/usr/lib/frr"))
VTYSH = os.environ.get("SATLAB_VTYSH", "vtysh")
# The routers run bgpd without zebra (and bfdd on its own): zebra learns every kernel next-hop object in
# its namespace and puts back its own copy of one it counts as used whenever someone else changes or
# deletes it, which fights the cluster controller's bucket tables (measured: > 1,000 such re-installs and
# flows sent to the wrong gateway). The routers' forwarding to the gateways is the controller's alone;
# their BGP only learns and announces. The gateways run all three and install their routes with zebra.
ROUTER_DAEMONS = ("bgpd", "bfdd")
# bfdd before bgpd: bgpd registers its BFD peers through zebra as it reads its config; started first, bfdd
# is connected to zebra to take them.
GATEWAY_DAEMONS = ("zebra", "bfdd", "bgpd")
# 200 ms x 4 = 0.8 s to declare a gateway dead: within the 1 s budget with room for the controller's
# 100 ms poll and its write, and not so tight that a saturated 2-core lab host drops sessions of
# gateways that are fine (150 ms x 4 did, with 1,000 flows: the packets wait in the softirq backlog).
BFD_INTERVAL_MS = 200
BFD_MULTIPLIER = 4
NICE = "-5"  # zebra and bgpd: above the lab's traffic, below the link emulator (-10)
# bfdd runs real-time (SCHED_FIFO): on a saturated 2-core lab host a bfdd that waits 0.6 s for a core
# declares every peer dead at once (measured: all six sessions of the hub with 1,000 flows running).
# It only sleeps and sends a packet every 200 ms, so it cannot starve anything.
BFDD_RT_PRIORITY = "10"


class FrrError(RuntimeError):
    pass


def frr_dir(topo: Paths, role: str) -> str:
    """The role's FRR config and runtime directory, where its daemons' vty sockets are."""
    return topo.path(f"frr-{role}")


# One file for zebra, bgpd and bfdd: each daemon skips the others' commands, so blocks end with "!"
# (a comment: the next top-level command leaves the block), never "exit", which would take a daemon that
# skipped the block's opening line out of configuration mode for the rest of the file.
def _header(topo: Topology, role: str) -> list[str]:
    d = frr_dir(topo, role)
    return [
        "frr defaults datacenter",
        f"hostname {topo.ns(role)}",
        f"log file {d}/frr.log informational",
        "!",
    ]


def _bfd_block() -> list[str]:
    return [
        "bfd",
        " profile cluster",
        f"  detect-multiplier {BFD_MULTIPLIER}",
        f"  receive-interval {BFD_INTERVAL_MS}",
        f"  transmit-interval {BFD_INTERVAL_MS}",
        "!",
    ]


def _peer_group(name: str, remote_as: int | str, bfd: bool = True) -> list[str]:
    return [
        f" neighbor {name} peer-group",
        f" neighbor {name} remote-as {remote_as}",
        *([f" neighbor {name} bfd", f" neighbor {name} bfd profile cluster"] if bfd else []),
        f" neighbor {name} timers connect 1",
        f" neighbor {name} advertisement-interval 0",
    ]


def daemons(role: str) -> tuple[str, ...]:
    return ROUTER_DAEMONS if role in ("hub", EDGE_ROLE) else GATEWAY_DAEMONS


def v4(prefixes: tuple[str, ...]) -> tuple[str, ...]:
    """What BGP carries: IPv4 (bgpd without zebra refuses the link-local next hops that IPv6 updates
    between directly connected peers carry); the gateways' IPv6 routes are static (plan.py) and the
    controller's IPv6 groups follow the IPv4 sessions (docs/cluster.md)."""
    return tuple(p for p in prefixes if ":" not in p)


def router_peers(topo: Topology, role: str) -> list[tuple[str, str]]:
    """(gateway address, router address) of each gateway link of a router."""
    if role == "hub":
        return [(m.hub_side_v4, m.hub_v4) for m in members(topo)]
    if role == EDGE_ROLE:
        return [(m.edge_side_v4, m.edge_v4) for m in members(topo)]
    raise ValueError(f"not a cluster router: {role!r}")


def render_router(topo: Topology, role: str) -> str:
    """The hub (satellite side) or edge (internet side) router: BGP learns and announces, BFD watches
    every gateway link; the cluster controller reads both and programs the forwarding."""
    if role == "hub":
        asn, router_id, networks = HUB_ASN, "10.71.2.2", v4(CLIENT_PREFIXES)
    else:
        asn, router_id, networks = EDGE_ASN, "10.71.3.1", v4(SERVER_PREFIXES)
    peers = router_peers(topo, role)
    lines = _header(topo, role) + [
        "bgp community-list standard DRAINING seq 5 permit graceful-shutdown",
        "!",
        "route-map FROM-GATEWAY permit 10",
        " match community DRAINING",
        " set local-preference 0",
        "!",
        "route-map FROM-GATEWAY permit 20",
        "!",
        f"router bgp {asn}",
        f" bgp router-id {router_id}",
        " no bgp ebgp-requires-policy",
        " no bgp default ipv4-unicast",
        # Without zebra there is no RIB to check `network` against: the router originates them as given.
        " no bgp network import-check",
        *_peer_group("GW4", GATEWAY_ASN, bfd=False),
    ]
    lines += [f" neighbor {gw} peer-group GW4" for gw, _ in peers]
    lines += [" address-family ipv4 unicast", *[f"  network {p}" for p in networks],
              "  neighbor GW4 activate", "  neighbor GW4 route-map FROM-GATEWAY in", "  maximum-paths 16",
              " exit-address-family", "!"]
    lines += _bfd_block()
    for gw, local in peers:
        lines += [f" peer {gw} local-address {local}", "  profile cluster", " !"]
    return "\n".join(lines + ["!", ""])


def render_gateway(topo: Topology, m: Member, serving: bool) -> str:
    """A gateway: passes each router's routes to the other with itself as next hop. Its sessions start
    shut when a splitter will run (`serving` False): its announcer opens them once the daemon serves,
    and shuts them again whenever it stops serving."""
    lines = _header(topo, m.role) + [
        f"router bgp {GATEWAY_ASN}",
        f" bgp router-id {m.router_id}",
        " no bgp ebgp-requires-policy",
        " no bgp default ipv4-unicast",
        *_peer_group("R4", "external"),
        *([] if serving else [" neighbor R4 shutdown"]),
        f" neighbor {m.hub_v4} peer-group R4",
        f" neighbor {m.edge_v4} peer-group R4",
        " address-family ipv4 unicast",
        "  neighbor R4 activate",
        " exit-address-family",
        "!",
    ]
    return "\n".join(lines + _bfd_block() + ["!", ""])


def _frr_ids() -> tuple[int, int]:
    try:
        pw = pwd.getpwnam("frr")
    except KeyError as e:
        raise FrrError("user frr missing: install Debian's frr (scripts/apt/lab.txt)") from e
    return pw.pw_uid, pw.pw_gid


def available() -> str | None:
    """None when FRR can run here, else why not."""
    missing = [str(FRR_DIR / d) for d in GATEWAY_DAEMONS if not (FRR_DIR / d).is_file()]
    if shutil.which(VTYSH) is None:
        missing.append(VTYSH)
    if missing:
        return f"FRR is not installed ({', '.join(missing)} missing; Debian package frr, scripts/apt/lab.txt)"
    return None


def write_config(topo: Topology, role: str, text: str) -> None:
    d = frr_dir(topo, role)
    uid, gid = _frr_ids()
    os.makedirs(d, mode=0o750, exist_ok=True)
    os.chown(d, uid, gid)
    path = os.path.join(d, "frr.conf")
    Path(path).write_text(text)
    os.chown(path, uid, gid)


def start(topo: Topology, role: str, timeout: float = 10.0) -> None:
    """In the role's namespace: zebra, bfdd, bgpd (gateways) or bgpd and bfdd (routers); returns once vtysh
    reaches them."""
    d = frr_dir(topo, role)
    conf, zsock = os.path.join(d, "frr.conf"), os.path.join(d, "zserv.api")
    bfdctl = os.path.join(d, "bfdd.sock")
    # A stopped FRR leaves its sockets behind. Waiting for a stale zserv.api would start bfdd before the new
    # zebra listens; its one refused connection leaves it without zebra, and bgpd's BFD peers never reach it
    # (seen after a drained gateway restarted: BGP Established, no BFD session).
    for stale in (zsock, bfdctl, *(os.path.join(d, f"{x}.vty") for x in daemons(role))):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(stale)
    for daemon in daemons(role):
        prio = ["chrt", "-f", BFDD_RT_PRIORITY] if daemon == "bfdd" else ["nice", "-n", NICE]
        argv = [*prio, str(FRR_DIR / daemon), "-f", conf, "-i", os.path.join(d, f"{daemon}.pid"),
                "-z", zsock, "--vty_socket", d, "--log", f"file:{d}/{daemon}.log"]
        if daemon == "bfdd":
            argv += ["--bfdctl", bfdctl]
        if daemon == "bgpd":
            argv += ["--limit-fds", "1024", *(["--no_zebra"] if "zebra" not in daemons(role) else [])]
        procs.spawn(topo.ns(role), argv, os.path.join(d, f"{daemon}.run.pid"),
                    os.path.join(d, f"{daemon}.out"))
        if daemon == "zebra":
            _wait_path(zsock, timeout, f"zebra in {topo.ns(role)}")
        if daemon == "bfdd" and "zebra" in daemons(role):
            _wait_path(os.path.join(d, "bfdd.vty"), timeout, f"bfdd in {topo.ns(role)}")
    deadline = time.monotonic() + timeout
    while True:
        try:
            vtysh(topo, role, "show bgp summary json")
            vtysh(topo, role, "show bfd peers json")
            return
        except FrrError as e:
            if time.monotonic() > deadline:
                raise FrrError(f"FRR in {topo.ns(role)} did not start: {e}") from e
            time.sleep(0.1)


def _wait_path(path: str, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise FrrError(f"{what} did not start ({path} missing)")
        time.sleep(0.05)


def stop(topo: Topology, role: str) -> None:
    d = frr_dir(topo, role)
    for daemon in reversed(GATEWAY_DAEMONS):
        procs.stop_pidfile(os.path.join(d, f"{daemon}.run.pid"), daemon)


def running(topo: Topology, role: str) -> bool:
    d = frr_dir(topo, role)
    pids = [procs.read_pid(os.path.join(d, f"{daemon}.run.pid")) for daemon in daemons(role)]
    return all(p is not None and procs.alive(p) for p in pids)


def vtysh(topo: Topology, role: str, *commands: str, timeout: float = 10.0) -> str:
    argv = [VTYSH, "--vty_socket", frr_dir(topo, role)]
    for c in commands:
        argv += ["-c", c]
    try:
        p = run(argv, check=False, timeout=timeout)
    except (OSError, TimeoutError) as e:
        raise FrrError(f"vtysh in {topo.ns(role)}: {e}") from e
    if p.returncode != 0:
        raise FrrError(f"vtysh {' / '.join(commands)} in {topo.ns(role)}: {(p.stderr or p.stdout).strip()}")
    return p.stdout


def vtysh_json(topo: Topology, role: str, *commands: str) -> list[Any]:
    """Each command's JSON answer (vtysh prints them one after the other)."""
    text = vtysh(topo, role, *commands)
    dec, i = json.JSONDecoder(), 0
    out: list[Any] = []
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        try:
            obj, i = dec.raw_decode(text, i)
        except ValueError as e:
            raise FrrError(f"vtysh in {topo.ns(role)} answered non-JSON: {text[i:i + 200]!r}") from e
        out.append(obj)


def configure(topo: Topology, role: str, *lines: str) -> None:
    """Lines in configuration mode (`configure terminal` ... `end`)."""
    vtysh(topo, role, "configure terminal", *lines, "end")
