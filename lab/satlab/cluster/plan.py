"""The hub cluster's network: who sits where, with which addresses, in which BGP AS.

```
 terminal --[sat link]-- hub (satellite-side router) --gwK--  gw1..gwN  --gwK-- edge (internet-side router) -- server
                          sat0 .2.2                     sat0 .1K.2  lan0 .2K.2           lan0 .3.1, cross0 .4.1
```
Per gateway K (1..8): hub `gwK` 10.71.(10+K).1/24 <-> gwK `sat0` 10.71.(10+K).2/24, and gwK `lan0`
10.71.(20+K).2/24 <-> edge `gwK` 10.71.(20+K).1/24 (IPv6: fd71:(10+K)::/64, fd71:(20+K)::/64). Inside
each gateway the interfaces are called as at a single hub (`sat0` toward the satellite, `lan0` toward the
servers), so the gateway's config is the single hub's with another next hop.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..topology import (
    CLUSTER_MAX_GATEWAYS,
    EDGE_ROLE,
    ROUTES,
    VETHS,
    Iface,
    Route,
    Topology,
    Veth,
    gateway_role,
)

HUB_ASN = 65001
EDGE_ASN = 65002
GATEWAY_ASN = 65100  # one AS for all gateways: equal AS paths, so the routers take them as equal-cost
# The client side (behind the satellite) and the internet side: what the routers route over the gateways.
CLIENT_PREFIXES = ("10.71.1.0/24", "fd71:1::/64")
SERVER_PREFIXES = ("10.71.3.0/24", "10.71.4.0/24", "fd71:3::/64", "fd71:4::/64")


@dataclass(frozen=True)
class Member:
    """One gateway as both routers see it."""

    index: int
    role: str  # namespace role, gwK
    hub_side_v4: str  # the gateway's sat0 (the hub router's next hop)
    hub_side_v6: str
    hub_v4: str  # the hub router's own address on that link (the gateway's next hop to the clients)
    hub_v6: str
    edge_side_v4: str  # the gateway's lan0 (the edge router's next hop)
    edge_side_v6: str
    edge_v4: str
    edge_v6: str

    @property
    def router_id(self) -> str:
        return self.hub_side_v4


def member(index: int) -> Member:
    if not 1 <= index <= CLUSTER_MAX_GATEWAYS:
        raise ValueError(f"gateway index {index} outside 1..{CLUSTER_MAX_GATEWAYS}")
    h, e = 10 + index, 20 + index
    return Member(index, gateway_role(index),
                  f"10.71.{h}.2", f"fd71:{h}::2", f"10.71.{h}.1", f"fd71:{h}::1",
                  f"10.71.{e}.2", f"fd71:{e}::2", f"10.71.{e}.1", f"fd71:{e}::1")


def members(topo: Topology) -> list[Member]:
    return [member(k) for k in range(1, topo.hub_gateways + 1)]


@dataclass(frozen=True)
class NetworkPlan:
    veths: tuple[Veth, ...]
    routes: tuple[Route, ...]
    routers: tuple[str, ...]  # roles that forward
    # Pairs of interfaces across an emulated link: their neighbours are made permanent.
    emulated_neighbours: tuple[tuple[Iface, Iface], ...]


def classic() -> NetworkPlan:
    return NetworkPlan(VETHS, ROUTES, ("terminal", "hub"),
                       ((VETHS[1].a, VETHS[2].b), (VETHS[4].a, VETHS[5].b)))


def cluster(topo: Topology) -> NetworkPlan:
    """The classic client/terminal/sat/server/cross with the hub split into two routers and N gateways."""
    # The classic pairs, with the hub's two terrestrial ends (lan0, cross0) moved to the edge router.
    client_lan, term_sat_link, hub_sat_link, hub_lan, hub_cross, cross_link = VETHS
    edge_lan = Iface(EDGE_ROLE, "lan0", hub_lan.a.v4, hub_lan.a.v6)
    edge_cross = Iface(EDGE_ROLE, "cross0", hub_cross.a.v4, hub_cross.a.v6)
    veths = [client_lan, term_sat_link, hub_sat_link, Veth(edge_lan, hub_lan.b),
             Veth(edge_cross, hub_cross.b, emulated=True), cross_link]
    for m in members(topo):
        veths.append(Veth(Iface("hub", m.role, (f"{m.hub_v4}/24",), (f"{m.hub_v6}/64",)),
                          Iface(m.role, "sat0", (f"{m.hub_side_v4}/24",), (f"{m.hub_side_v6}/64",))))
        veths.append(Veth(Iface(m.role, "lan0", (f"{m.edge_side_v4}/24",), (f"{m.edge_side_v6}/64",)),
                          Iface(EDGE_ROLE, m.role, (f"{m.edge_v4}/24",), (f"{m.edge_v6}/64",))))
    # The classic static routes (the hub's are its route to the client subnets via the terminal, which
    # it originates toward the gateways); everything IPv4 else is learned over BGP (frr.py). BGP carries
    # IPv4 only, so each gateway's IPv6 routes are static; the routers' IPv6 groups follow the gateways'
    # IPv4 sessions (controller.py).
    v6_routes = tuple(Route(m.role, p, m.edge_v6 if p in SERVER_PREFIXES else m.hub_v6)
                      for m in members(topo) for p in (*SERVER_PREFIXES, *CLIENT_PREFIXES) if ":" in p)
    return NetworkPlan(tuple(veths), ROUTES + v6_routes, ("terminal", "hub", EDGE_ROLE, *topo.gateway_roles),
                       ((term_sat_link.a, hub_sat_link.b), (edge_cross, cross_link.b)))


def network(topo: Topology) -> NetworkPlan:
    return cluster(topo) if topo.hub_gateways else classic()
