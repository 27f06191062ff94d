"""What the cluster looks like right now, read from where it lives: the routers' kernel bucket tables,
FRR's BGP and BFD state (vtysh JSON), the gateways' daemons and the mirrors' and announcers' status files.
"""

from __future__ import annotations

import json
from typing import Any

from ..sysrun import ip
from ..topology import EDGE_ROLE, Topology
from . import fabric, frr
from .plan import CLIENT_PREFIXES, SERVER_PREFIXES, members

# The pairs of groups that must map every flow the same way: a flow from a client to a server is hashed
# by the hub's group for the server prefix and answered through the edge's group for the client prefix.
PAIRED = (("10.71.3.0/24", "10.71.1.0/24"), ("fd71:3::/64", "fd71:1::/64"))


def _group_id(role: str, prefix: str) -> int:
    prefixes = SERVER_PREFIXES if role == "hub" else CLIENT_PREFIXES
    return fabric.GROUP_BASE + prefixes.index(prefix)


def _member_of_nh(topo: Topology) -> dict[int, str]:
    out = {}
    for m in members(topo):
        for v6 in (0, 1):
            out[fabric.NH_BASE + 2 * m.index + v6] = m.role
    return out


def buckets(topo: Topology, role: str, prefix: str) -> list[str | None]:
    """The gateway behind each bucket of the router's group for `prefix` (None: no group)."""
    gid = _group_id(role, prefix)
    p = ip(topo.ns(role), "-j", "nexthop", "bucket", "show", "id", str(gid), check=False)
    if p.returncode != 0 or not p.stdout.strip():
        return []
    names = _member_of_nh(topo)
    rows = sorted(json.loads(p.stdout), key=lambda r: int(r["bucket"]["index"]))
    return [names.get(int(r["bucket"]["nhid"])) for r in rows]


def bucket_counts(table: list[str | None]) -> dict[str, int]:
    out: dict[str, int] = {}
    for g in table:
        if g is not None:
            out[g] = out.get(g, 0) + 1
    return out


def tables_agree(topo: Topology) -> dict[str, Any]:
    """Both routers' bucket tables, pair by pair: they must be equal for every flow to stay on one gateway."""
    out: dict[str, Any] = {}
    for server_prefix, client_prefix in PAIRED:
        hub, edge = buckets(topo, "hub", server_prefix), buckets(topo, EDGE_ROLE, client_prefix)
        out[f"{server_prefix}|{client_prefix}"] = {
            "agree": hub == edge, "hub": bucket_counts(hub), "edge": bucket_counts(edge),
            "differ": [i for i, (a, b) in enumerate(zip(hub, edge, strict=False)) if a != b]}
    return out


def router_view(topo: Topology, role: str) -> dict[str, Any]:
    """A router's BGP peers (state, prefixes received) and BFD sessions, as FRR reports them."""
    try:
        summary, bfd = frr.vtysh_json(topo, role, "show bgp summary json", "show bfd peers json")
    except (frr.FrrError, ValueError) as e:
        return {"error": str(e)}
    peers: dict[str, Any] = {}
    for afi in ("ipv4Unicast", "ipv6Unicast"):
        for addr, p in (summary.get(afi) or {}).get("peers", {}).items():
            peers[addr] = {"afi": afi, "state": p.get("state"), "prefixes_received": p.get("pfxRcd"),
                           "uptime_ms": p.get("peerUptimeMsec")}
    sessions = {str(b.get("peer")): {"status": b.get("status"), "uptime_s": b.get("uptime"),
                                     "downtime_s": b.get("downtime")} for b in bfd}
    return {"bgp": peers, "bfd": sessions}


def gateway_view(topo: Topology, role: str) -> dict[str, Any]:
    from ..gateway import request, socket_path

    m = next(x for x in members(topo) if x.role == role)
    out: dict[str, Any] = {"namespace": topo.ns(role), "frr_running": frr.running(topo, role),
                           "announcer": fabric.announcer_status(topo, role),
                           "addresses": {"hub_side": [m.hub_side_v4, m.hub_side_v6],
                                         "edge_side": [m.edge_side_v4, m.edge_side_v6]}}
    try:
        status, h = request(socket_path(topo, role), "GET", "/v1/health", timeout=2.0)
        _, c = request(socket_path(topo, role), "GET", "/v1/counters", timeout=2.0)
        out["daemon"] = {"status": h.get("status") if status == 200 else f"http {status}",
                         "fail_open": h.get("fail_open"), "revision": h.get("config_revision"),
                         "flows_live": c.get("flows_live"), "flows_total": c.get("flows_total")}
    except (OSError, ValueError, IndexError):
        out["daemon"] = None
    return out


def status(topo: Topology) -> dict[str, Any]:
    return {
        "gateways": {role: gateway_view(topo, role) for role in topo.gateway_roles},
        "routers": {role: {**router_view(topo, role), "mirror": fabric.mirror_status(topo, role)}
                    for role in fabric.ROUTER_ROLES},
        "buckets": tables_agree(topo),
    }
