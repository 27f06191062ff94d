"""Bringing the cluster's control plane up and down: the routers' hashing, the gateways' guard, FRR in
every router and gateway, the controller of the routers' bucket tables, the gateways' announcers
(docs/cluster.md).

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
from .plan import CLIENT_PREFIXES, GATEWAY_ASN, SERVER_PREFIXES, members

ROUTER_ROLES = ("hub", EDGE_ROLE)
TABLE = 7100  # the controller's routing table and its ip rule's priority
ID_BASE = 20000  # the controller's next-hop object ids (zebra's own start at 1)
BUCKETS = 64  # a flow's bucket is hash % 64; 64 one-bucket members fit in one iproute2 request (8 bytes each)
# Policy 3 hashes the fields below from the packet itself. Policy 1 (L4) would do too, but for a packet
# that already carries a layer-4 hash it uses that hash instead (the sending socket's random one on a
# veth, a NIC's receive hash on hardware): not seeded, not symmetric (docs/cluster.md, measured).
HASH_FIELDS = "0x0037"  # source and destination address, protocol, source and destination port
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
        run_ns(topo.ns(role), ["sysctl", "-q", "-w", "net.ipv4.fib_multipath_hash_policy=3",
                               "net.ipv6.fib_multipath_hash_policy=3",
                               f"net.ipv4.fib_multipath_hash_fields={HASH_FIELDS}",
                               f"net.ipv6.fib_multipath_hash_fields={HASH_FIELDS}",
                               # One seed for both families (IPv6 uses the IPv4 one).
                               f"net.ipv4.fib_multipath_hash_seed={hash_seed(seed)}"])
    for m in members(topo):
        ns = topo.ns(m.role)
        run_ns(ns, ["nft", "-f", "-"], input_text=guard_ruleset())
        # Present once the table above made conntrack track this namespace.
        run_ns(ns, ["sysctl", "-q", "-w", "net.netfilter.nf_conntrack_tcp_loose=0",
                    "net.netfilter.nf_conntrack_tcp_be_liberal=1",
                    # A link flap must not take the gateway's IPv6 addresses with it.
                    "net.ipv6.conf.all.keep_addr_on_down=1"])


def push_config(topo: Topology) -> dict[str, Any]:
    """With the peer path on: the table also goes to every gateway (tablepush.py); the terminal fetches it
    from them across the satellite."""
    from ..gateway import PEER_PORT, socket_path

    return {"router_ns": topo.ns("hub"), "router_iif": "sat0", "fields": int(HASH_FIELDS, 16), "peer_port": PEER_PORT,
            "targets": [{"socket": socket_path(topo, m.role), "member": m.role} for m in members(topo)]}


def controller_config(topo: Topology, idle_timer_s: int, peer: bool = False) -> dict[str, Any]:
    return {
        # The hub routes the server side over the gateways, the edge the client side.
        "routers": [{"role": "hub", "ns": topo.ns("hub"), "vty_socket": frr.frr_dir(topo, "hub"),
                     "prefixes": list(SERVER_PREFIXES)},
                    {"role": EDGE_ROLE, "ns": topo.ns(EDGE_ROLE), "vty_socket": frr.frr_dir(topo, EDGE_ROLE),
                     "prefixes": list(CLIENT_PREFIXES)}],
        "gateways": [{"name": m.role, "index": m.index,
                      "via": {"hub": {"v4": m.hub_side_v4, "v6": m.hub_side_v6, "dev": m.role},
                              EDGE_ROLE: {"v4": m.edge_side_v4, "v6": m.edge_side_v6, "dev": m.role}}}
                     for m in members(topo)],
        "table": TABLE, "rule_pref": TABLE, "id_base": ID_BASE, "buckets": BUCKETS,
        "idle_timer_s": idle_timer_s, "status_file": topo.path("controller.json"),
        "push": push_config(topo) if peer else None,
    }


def _python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def start_routing(topo: Topology, idle_timer_s: int, splitters: bool, peer: bool = False) -> None:
    """FRR everywhere, then the controller; `splitters`: gateways start not serving (sessions shut) until
    their announcer sees the daemon serve; `peer`: the peer path is on (the controller pushes its table
    to the gateways and the terminal)."""
    why = frr.available()
    if why:
        raise ClusterError(why)
    for role in ROUTER_ROLES:
        frr.write_config(topo, role, frr.render_router(topo, role))
    for m in members(topo):
        frr.write_config(topo, m.role, frr.render_gateway(topo, m, serving=not splitters))
    for role in (*ROUTER_ROLES, *topo.gateway_roles):
        frr.start(topo, role)
    cfg = topo.path("controller.conf.json")
    with open(cfg, "w") as f:
        json.dump(controller_config(topo, idle_timer_s, peer), f, indent=2)
    procs.spawn(topo.ns("hub"), _python_module("satlab.cluster.controller", cfg),
                topo.path("controller.pid"), topo.path("controller.log"))


def announcer_files(topo: Topology, role: str) -> tuple[str, str, str, str]:
    return (topo.path(f"announcer-{role}.conf.json"), topo.path(f"announcer-{role}.pid"),
            topo.path(f"announcer-{role}.log"), topo.path(f"announcer-{role}.json"))


def start_announcer(topo: Topology, role: str) -> None:
    from ..gateway import socket_path

    cfg, pid, log, status = announcer_files(topo, role)
    with open(cfg, "w") as f:
        json.dump({"control_socket": socket_path(topo, role), "vty_socket": frr.frr_dir(topo, role),
                   "status_file": status, "vtysh": frr.VTYSH, "asn": GATEWAY_ASN}, f, indent=2)
    procs.spawn(topo.ns(role), _python_module("satlab.cluster.announcer", cfg), pid, log)


def announcer_running(topo: Topology, role: str) -> bool:
    pid = procs.read_pid(announcer_files(topo, role)[1])
    return pid is not None and procs.alive(pid) and any("satlab.cluster.announcer" in a for a in procs.cmdline(pid))


def stop_announcer(topo: Topology, role: str) -> None:
    _, pid, _, _ = announcer_files(topo, role)
    procs.stop_pidfile(pid, "satlab.cluster.announcer")


def controller_status(topo: Topology) -> dict[str, Any] | None:
    try:
        with open(topo.path("controller.json")) as f:
            data: dict[str, Any] = json.load(f)
            return data
    except (OSError, ValueError):
        return None


def controller_log_tail(topo: Topology) -> str:
    return _tail(topo.path("controller.log"))


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
    """Announcers, the controller, FRR: what start_routing and start_announcer started (idempotent)."""
    for role in topo.gateway_roles:
        stop_announcer(topo, role)
    procs.stop_pidfile(topo.path("controller.pid"), "satlab.cluster.controller")
    for role in (*topo.gateway_roles, *ROUTER_ROLES):
        if os.path.isdir(frr.frr_dir(topo, role)):
            frr.stop(topo, role)
