"""The fixed satlab topology of DEVELOPERS.md: namespaces, veth pairs, addresses, routes.

Only the namespace names carry the prefix; interface names inside the namespaces never change,
so several topologies (prefixes) can coexist on one machine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Protocol

from .webnames import SERVER_EXTRA_V4, SERVER_EXTRA_V6

ROLES = ("client", "terminal", "sat", "hub", "server", "cross")
DEFAULT_PREFIX = "sl-"
RUN_ROOT = "/run/satlab"


@dataclass(frozen=True)
class Iface:
    role: str
    name: str
    v4: tuple[str, ...] = ()
    v6: tuple[str, ...] = ()


@dataclass(frozen=True)
class Veth:
    a: Iface
    b: Iface
    # True when the pair feeds a link emulator: offloads must be off on both ends.
    emulated: bool = False


@dataclass(frozen=True)
class Route:
    role: str
    dest: str  # "default" or a prefix
    via: str


@dataclass(frozen=True)
class EmulatedLink:
    """One satlab-link instance: bridges iface a <-> iface b inside the 'sat' namespace."""

    name: str  # "sat" or "cross"
    a: str
    b: str
    # Which direction of the emulator is the forward (toward users / toward the cross host) path.
    forward: str  # "a_to_b" or "b_to_a"


VETHS: tuple[Veth, ...] = (
    Veth(Iface("client", "eth0", ("10.71.1.10/24", "10.71.1.11/24"), ("fd71:1::10/64", "fd71:1::11/64")),
         Iface("terminal", "lan0", ("10.71.1.1/24",), ("fd71:1::1/64",))),
    Veth(Iface("terminal", "sat0", ("10.71.2.1/24",), ("fd71:2::1/64",)),
         Iface("sat", "st0"), emulated=True),
    Veth(Iface("sat", "sh0"),
         Iface("hub", "sat0", ("10.71.2.2/24",), ("fd71:2::2/64",)), emulated=True),
    Veth(Iface("hub", "lan0", ("10.71.3.1/24",), ("fd71:3::1/64",)),
         # The server's own address first (its identity), then the web origins' and the DNS server's.
         Iface("server", "eth0", ("10.71.3.10/24", *(f"{a}/24" for a in SERVER_EXTRA_V4)),
               ("fd71:3::10/64", *(f"{a}/64" for a in SERVER_EXTRA_V6)))),
    # The hub <-> cross path also crosses an emulator (in the sat namespace) so cross is short-RTT
    # but not zero-RTT: hub cross0 <-> sat hx0 ... sat cx0 <-> cross eth0.
    Veth(Iface("hub", "cross0", ("10.71.4.1/24",), ("fd71:4::1/64",)),
         Iface("sat", "hx0"), emulated=True),
    Veth(Iface("sat", "cx0"),
         Iface("cross", "eth0", ("10.71.4.10/24",), ("fd71:4::10/64",)), emulated=True),
)

ROUTES: tuple[Route, ...] = (
    Route("client", "default", "10.71.1.1"),
    Route("client", "default", "fd71:1::1"),
    Route("terminal", "default", "10.71.2.2"),
    Route("terminal", "default", "fd71:2::2"),
    Route("hub", "10.71.1.0/24", "10.71.2.1"),
    Route("hub", "fd71:1::/64", "fd71:2::1"),
    Route("server", "default", "10.71.3.1"),
    Route("server", "default", "fd71:3::1"),
    Route("cross", "default", "10.71.4.1"),
    Route("cross", "default", "fd71:4::1"),
)

ROUTERS = ("terminal", "hub")

# a_to_b of the satellite emulator carries terminal -> hub (return); b_to_a is forward.
SAT_LINK = EmulatedLink("sat", a="st0", b="sh0", forward="b_to_a")
# a_to_b of the cross emulator carries hub -> cross.
CROSS_LINK = EmulatedLink("cross", a="hx0", b="cx0", forward="a_to_b")
LINKS = (SAT_LINK, CROSS_LINK)

SERVER_V4 = "10.71.3.10"
SERVER_V6 = "fd71:3::10"
CLIENT_V4 = "10.71.1.10"
CROSS_V4 = "10.71.4.10"


# A hub cluster (`satlab up --hub-gateways N`, docs/cluster.md): the hub namespace becomes the
# satellite-side router, `edge` the internet-side one, and gw1..gwN the gateways between them.
CLUSTER_MAX_GATEWAYS = 8
EDGE_ROLE = "edge"


def gateway_role(index: int) -> str:
    """The namespace role of cluster gateway `index` (1-based)."""
    return f"gw{index}"


class Paths(Protocol):
    """What helpers that only name namespaces and run-dir files need of a Topology."""

    def ns(self, role: str) -> str: ...

    def path(self, name: str) -> str: ...


@dataclass(frozen=True)
class Topology:
    prefix: str = DEFAULT_PREFIX
    run_root: str = RUN_ROOT
    extra: dict[str, str] = field(default_factory=dict)
    # 0: the classic lab (DEVELOPERS.md); N >= 1: a hub cluster of N gateways.
    hub_gateways: int = 0

    @property
    def roles(self) -> tuple[str, ...]:
        if not self.hub_gateways:
            return ROLES
        return (*ROLES, EDGE_ROLE, *self.gateway_roles)

    @property
    def gateway_roles(self) -> tuple[str, ...]:
        return tuple(gateway_role(k) for k in range(1, self.hub_gateways + 1))

    def ns(self, role: str) -> str:
        if role not in self.roles:
            raise ValueError(f"unknown namespace {role!r}; one of {', '.join(self.roles)}")
        return f"{self.prefix}{role}"

    @property
    def namespaces(self) -> list[str]:
        return [self.ns(r) for r in self.roles]

    @property
    def run_dir(self) -> str:
        return os.path.join(self.run_root, self.prefix)

    def path(self, name: str) -> str:
        return os.path.join(self.run_dir, name)


def resolve_prefix(cli_value: str | None) -> str:
    prefix = cli_value or os.environ.get("SATLAB_PREFIX") or DEFAULT_PREFIX
    if not prefix or "/" in prefix or len(prefix) > 12 or not prefix.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"bad prefix {prefix!r}: letters, digits, '-', '_' only, at most 12 characters")
    return prefix
