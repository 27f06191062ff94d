"""Bringing the cluster's control plane up and down: the routers' hashing, the gateways' guard, FRR in
every router and gateway, the routers' resilient mirrors, the gateways' announcers (docs/cluster.md).

Called by `satlab up --hub-gateways N` after the namespaces and links exist (lab.py) and by `down`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from .. import procs
from ..sysrun import run_ns
from ..topology import EDGE_ROLE, Topology
from . import frr
from .plan import CLIENT_PREFIXES, SERVER_PREFIXES, members

ROUTER_ROLES = ("hub", EDGE_ROLE)
TABLE = 7100  # the mirror's routing table and its ip rule's priority
NH_BASE = 7000
GROUP_BASE = 7100
BUCKETS = 128  # a flow's bucket is hash % 128: the share a gateway can gain or lose at a time
DEFAULT_IDLE_TIMER_S = 30
GUARD_TABLE = "perigee_cluster"


class ClusterError(RuntimeError):
    pass


def hash_seed(lab_seed: int) -> int:
    """The multipath hash seed both routers share (nonzero: 0 means a random seed per namespace)."""
    return 0x5EED0000 + (lab_seed & 0xFFFF)


def guard_ruleset() -> str:
    """A gateway's forward filter: TCP that this gateway did not see from its SYN is answered with a reset.

    Packets of a split flow are delivered to the gateway's own sockets (input), never forwarded; a
    forwarded TCP packet of a connection conntrack never saw start (`nf_conntrack_tcp_loose=0` makes it
    `invalid`) belongs to a flow split on another gateway: after a gateway fails, its flows' packets
    arrive at the survivors, and without this they would be forwarded with sequence numbers the far end
    never sent, which neither end resets: the flow would hang until a timeout.
    """
    return (
        f"table inet {GUARD_TABLE} {{}}\n"
        f"delete table inet {GUARD_TABLE}\n"
        f"table inet {GUARD_TABLE} {{\n"
        "  counter reset_foreign {}\n"
        "  counter forwarded_tcp {}\n"
        "  chain forward {\n"
        "    type filter hook forward priority filter; policy accept;\n"
        "    meta l4proto tcp ct state invalid tcp flags & rst == 0 counter name reset_foreign"
        " reject with tcp reset\n"
        "    meta l4proto tcp counter name forwarded_tcp\n"
        "  }\n"
        "}\n"
    )


def prepare_network(topo: Topology, seed: int) -> None:
    """Symmetric L4 multipath hashing with one seed on both routers; the guard on every gateway."""
    for role in ROUTER_ROLES:
        run_ns(topo.ns(role), ["sysctl", "-q", "-w", "net.ipv4.fib_multipath_hash_policy=1",
                               "net.ipv6.fib_multipath_hash_policy=1",
                               f"net.ipv4.fib_multipath_hash_seed={hash_seed(seed)}"])
    for m in members(topo):
        ns = topo.ns(m.role)
        run_ns(ns, ["nft", "-f", "-"], input_text=guard_ruleset())
        # Present once the table above made conntrack track this namespace.
        run_ns(ns, ["sysctl", "-q", "-w", "net.netfilter.nf_conntrack_tcp_loose=0",
                    "net.netfilter.nf_conntrack_tcp_be_liberal=1"])


def _mirror_config(topo: Topology, role: str, idle_timer_s: int) -> dict[str, Any]:
    hub = role == "hub"
    return {
        "vty_socket": frr.frr_dir(topo, role),
        "members": [{"name": m.role, "index": m.index, "dev": m.role,
                     "v4": m.hub_side_v4 if hub else m.edge_side_v4,
                     "v6": m.hub_side_v6 if hub else m.edge_side_v6} for m in members(topo)],
        # The hub routes the server side over the gateways, the edge the client side.
        "prefixes": list(SERVER_PREFIXES if hub else CLIENT_PREFIXES),
        "table": TABLE, "rule_pref": TABLE, "nh_base": NH_BASE, "group_base": GROUP_BASE,
        "buckets": BUCKETS, "idle_timer_s": idle_timer_s,
        "status_file": topo.path(f"mirror-{role}.json"),
        "vtysh": frr.VTYSH,
    }


def _python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def start_routing(topo: Topology, idle_timer_s: int, splitters: bool, env: dict[str, str]) -> None:
    """FRR everywhere, then the mirrors; `splitters`: gateways start not serving (prepended) until
    their announcer sees the daemon serve."""
    why = frr.available()
    if why:
        raise ClusterError(why)
    for role in ROUTER_ROLES:
        frr.write_config(topo, role, frr.render_router(topo, role))
    for m in members(topo):
        frr.write_config(topo, m.role, frr.render_gateway(topo, m, serving=not splitters))
    for role in (*ROUTER_ROLES, *topo.gateway_roles):
        frr.start(topo, role)
    for role in ROUTER_ROLES:
        cfg = topo.path(f"mirror-{role}.conf.json")
        with open(cfg, "w") as f:
            json.dump(_mirror_config(topo, role, idle_timer_s), f, indent=2)
        procs.spawn(topo.ns(role), _python_module("satlab.cluster.resilient", cfg),
                    topo.path(f"mirror-{role}.pid"), topo.path(f"mirror-{role}.log"), env=env)


def announcer_files(topo: Topology, role: str) -> tuple[str, str, str, str]:
    return (topo.path(f"announcer-{role}.conf.json"), topo.path(f"announcer-{role}.pid"),
            topo.path(f"announcer-{role}.log"), topo.path(f"announcer-{role}.json"))


def start_announcer(topo: Topology, role: str, env: dict[str, str]) -> None:
    from ..gateway import socket_path

    cfg, pid, log, status = announcer_files(topo, role)
    with open(cfg, "w") as f:
        json.dump({"control_socket": socket_path(topo, role), "vty_socket": frr.frr_dir(topo, role),
                   "status_file": status, "vtysh": frr.VTYSH}, f, indent=2)
    procs.spawn(topo.ns(role), _python_module("satlab.cluster.announcer", cfg), pid, log, env=env)


def stop_announcer(topo: Topology, role: str) -> None:
    _, pid, _, _ = announcer_files(topo, role)
    procs.stop_pidfile(pid, "satlab.cluster.announcer")


def mirror_status(topo: Topology, role: str) -> dict[str, Any] | None:
    try:
        with open(topo.path(f"mirror-{role}.json")) as f:
            data: dict[str, Any] = json.load(f)
            return data
    except (OSError, ValueError):
        return None


def serving_members(topo: Topology, role: str) -> dict[str, set[str]]:
    """prefix -> gateways in the router's group with full weight (from its mirror's last pass)."""
    st = mirror_status(topo, role) or {}
    return {p: {n for n, w in v.get("members", {}).items() if w > 1} for p, v in st.get("prefixes", {}).items()}


def wait_converged(topo: Topology, gateways: set[str], timeout: float = 40.0) -> None:
    """Until both routers route every cluster prefix over exactly `gateways` at full weight."""
    deadline = time.monotonic() + timeout
    while True:
        views = {role: serving_members(topo, role) for role in ROUTER_ROLES}
        want = {"hub": SERVER_PREFIXES, EDGE_ROLE: CLIENT_PREFIXES}
        if all(set(views[r].keys()) >= set(want[r]) and all(views[r][p] == gateways for p in want[r])
               for r in ROUTER_ROLES):
            return
        if time.monotonic() > deadline:
            raise ClusterError(f"cluster routing did not converge on {sorted(gateways)} in {timeout:.0f} s: {views}")
        for role in ROUTER_ROLES:
            pid = procs.read_pid(topo.path(f"mirror-{role}.pid"))
            if pid is None or not procs.alive(pid):
                log = _tail(topo.path(f"mirror-{role}.log"))
                raise ClusterError(f"resilient mirror on {topo.ns(role)} is not running; log:\n{log}")
        time.sleep(0.1)


def announcer_status(topo: Topology, role: str) -> dict[str, Any] | None:
    try:
        with open(announcer_files(topo, role)[3]) as f:
            data: dict[str, Any] = json.load(f)
            return data
    except (OSError, ValueError):
        return None


def wait_serving(topo: Topology, gateways: set[str], timeout: float = 20.0) -> None:
    """Until the announcers of `gateways` announce them as serving."""
    deadline = time.monotonic() + timeout
    while True:
        waiting = sorted(g for g in gateways if not (announcer_status(topo, g) or {}).get("serving"))
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise ClusterError(f"gateways not serving after {timeout:.0f} s: {', '.join(waiting)}")
        time.sleep(0.05)


def _tail(path: str, n: int = 800) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


def stop(topo: Topology) -> None:
    """Announcers, mirrors, FRR: what start_routing and start_announcer started (idempotent)."""
    for role in topo.gateway_roles:
        stop_announcer(topo, role)
    for role in ROUTER_ROLES:
        procs.stop_pidfile(topo.path(f"mirror-{role}.pid"), "satlab.cluster.resilient")
    for role in (*topo.gateway_roles, *ROUTER_ROLES):
        if os.path.isdir(frr.frr_dir(topo, role)):
            frr.stop(topo, role)
