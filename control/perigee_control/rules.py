"""The rules between fields of a gateway config, as the gateway's validator has them (gateway/crates/perigee/
src/gateway/config/validate.rs, and the Squid and resolver crates' `validate`). A field's own rules (type,
bounds, pattern) come from the schema; these are what no single field can say. Each generated model with such a
rule has the base class of the same name here (`--base-class-map` in `generate.py`);
tests/test_config_contract.py holds them to the gateway's own validator.

The base classes declare, for the type checker only, the fields their rules read."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any, Self

from pydantic import model_validator

from perigee_control.base import Strict
from perigee_control.formats import (
    DNS_PORT,
    V4_MAPPED,
    IpNetwork,
    parse_cidr,
    parse_ip,
    parse_upstream,
    std_net_kind,
    zone_key,
)
from perigee_control.limits import default, extension
from perigee_control.reports import Flow

if TYPE_CHECKING:
    from perigee_control import config as generated


class InterfacesRules(Strict):
    if TYPE_CHECKING:
        lan: list[str]
        satellite: str

    @model_validator(mode="after")
    def _distinct(self) -> Self:
        if len(set(self.lan)) != len(self.lan):
            raise ValueError("lan: duplicate interface")
        if self.satellite in self.lan:
            raise ValueError(f"satellite: '{self.satellite}' is also listed as a LAN interface")
        return self


class RouteRules(Strict):
    if TYPE_CHECKING:
        dst: str
        via: str

    @model_validator(mode="after")
    def _same_family(self) -> Self:
        if ipaddress.ip_network(self.dst).version != ipaddress.ip_address(self.via).version:
            raise ValueError("dst and via must be the same address family")
        return self


class SatelliteRules(Strict):
    if TYPE_CHECKING:
        routes: list[generated.Route]

    @model_validator(mode="after")
    def _unique_routes(self) -> Self:
        dsts = [r.dst for r in self.routes]  # host bits were cleared: equal prefixes are equal text
        if len(set(dsts)) != len(dsts):
            raise ValueError("routes: duplicate dst")
        return self


class ShapingRules(Strict):
    if TYPE_CHECKING:
        enabled: bool
        rate_bps: int

    @model_validator(mode="after")
    def _rate(self) -> Self:
        # The generated model's field carries the gateway's MIN_SHAPING_BPS.
        lowest = int(extension(type(self), "rate_bps", "x-minimum-nonzero"))
        if 0 < self.rate_bps < lowest:
            raise ValueError(f"rate_bps: must be at least {lowest} bit/s (0 = none)")
        if self.enabled and self.rate_bps == 0:
            raise ValueError("rate_bps: required when shaping is enabled")
        return self


class PeerRules(Strict):
    """As the gateway's config/validate_peer.rs (the rules that need no other section)."""

    if TYPE_CHECKING:
        enabled: bool
        hub: str
        hub_fingerprints: list[str]
        listen: list[str]
        terminals: list[generated.PeerTerminal]

    @model_validator(mode="after")
    def _peer(self) -> Self:
        if self.hub:
            unspecified, multicast, loopback = std_net_kind(parse_ip(self.hub))
            if unspecified or multicast or loopback:
                raise ValueError("hub: must be the hub's unicast address")
        for i, f in enumerate(self.hub_fingerprints):
            if f in self.hub_fingerprints[:i]:
                raise ValueError(f"hub_fingerprints[{i}]: {f} is listed twice")
        for i, ip in enumerate(self.listen):
            unspecified, multicast, _ = std_net_kind(parse_ip(ip))
            if unspecified or multicast:
                raise ValueError(f"listen[{i}]: must be one of the hub's unicast addresses (its satellite side's)")
            if ip in self.listen[:i]:
                raise ValueError(f"listen[{i}]: {ip} is listed twice")
        self._check_terminals()
        return self

    def _check_terminals(self) -> None:
        names: set[str] = set()
        keys: dict[str, str] = {}
        prefixes: list[tuple[str, IpNetwork]] = []
        for i, t in enumerate(self.terminals):
            if t.name in names:
                raise ValueError(f"terminals[{i}].name: terminal '{t.name}' is enrolled twice")
            names.add(t.name)
            for j, key in enumerate(t.fingerprints):
                if key in keys:
                    raise ValueError(f"terminals[{i}].fingerprints[{j}]: {key} is already terminal '{keys[key]}''s")
                keys[key] = t.name
            for j, text in enumerate(t.prefixes):
                net = parse_cidr(text)
                if net.prefixlen == 0:
                    raise ValueError(f"terminals[{i}].prefixes[{j}]: a terminal's prefix is never a /0")
                for owner, other in prefixes:
                    if other.version == net.version and other.overlaps(net):
                        raise ValueError(f"terminals[{i}].prefixes[{j}]: {text} overlaps {other} of terminal '{owner}'")
                prefixes.append((t.name, net))


class MatchRules(Strict):
    if TYPE_CHECKING:
        protocol: str
        dports: list[str]
        sports: list[str]

    @model_validator(mode="after")
    def _ports_need_l4(self) -> Self:
        if self.protocol == "any" and (self.dports or self.sports):
            raise ValueError("ports need protocol tcp or udp")
        return self


class TrafficClassRules(Strict):
    if TYPE_CHECKING:
        name: str
        action: str
        match: generated.Match

    @model_validator(mode="after")
    def _name_and_cache(self) -> Self:
        if self.name == "default":
            raise ValueError("name: 'default' is reserved")
        if self.action == "cache" and self.match.protocol != "tcp":
            raise ValueError("action 'cache' needs protocol 'tcp'")
        return self


class BypassRuleRules(Strict):
    if TYPE_CHECKING:
        protocol: str
        cidrs: list[str]
        ports: list[str]

    @model_validator(mode="after")
    def _ports_need_l4(self) -> Self:
        with_ports = extension(type(self), "ports", "x-protocols")  # the gateway's list (BypassProtocol::has_ports)
        if self.ports and self.protocol not in with_ports:
            raise ValueError(f"ports need protocol {' or '.join(with_ports)}")
        if self.protocol == "any" and not self.cidrs:
            raise ValueError("protocol 'any' needs cidrs (it would bypass everything)")
        return self


class RefreshPatternRules(Strict):
    if TYPE_CHECKING:
        min_minutes: int
        max_minutes: int

    @model_validator(mode="after")
    def _min_below_max(self) -> Self:
        if self.min_minutes > self.max_minutes:
            raise ValueError("min_minutes: must not exceed max_minutes")
        return self


class CacheRules(Strict):
    if TYPE_CHECKING:
        port: int
        admin_port: int
        store: str
        disk_mb: int
        max_object_mb: int
        max_memory_object_mb: int

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.admin_port == self.port:
            raise ValueError("admin_port: must differ from cache.port")
        rock_max = int(extension(type(self), "disk_mb", "x-maximum-rock"))  # rock: 2^24 slots of 16 KiB
        if self.store == "rock" and self.disk_mb > rock_max:
            raise ValueError(f"disk_mb: must be at most {rock_max} for store rock")
        if self.max_memory_object_mb > self.max_object_mb:
            raise ValueError("max_memory_object_mb: must not exceed max_object_mb")
        return self


class DnsRules(Strict):
    if TYPE_CHECKING:
        enabled: bool
        upstream: list[str]
        intercept_for: list[str]
        private_domains: list[str]
        min_ttl_s: int
        max_ttl_s: int

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        seen: set[tuple[object, int]] = set()
        for i, u in enumerate(self.upstream):
            key = parse_upstream(u)
            if key in seen:
                raise ValueError(f"upstream[{i}]: {u!r} is listed twice")
            seen.add(key)
        addrs: set[object] = set()
        for i, a in enumerate(self.intercept_for):
            addr = parse_ip(a)
            if any(std_net_kind(addr)):
                raise ValueError(f"intercept_for[{i}]: {a} is not a unicast address a client could send a query to")
            if addr in addrs:
                raise ValueError(f"intercept_for[{i}]: {a} is listed twice")
            addrs.add(addr)
        zones: set[str] = set()
        for i, z in enumerate(self.private_domains):
            if zone_key(z) in zones:
                raise ValueError(f"private_domains[{i}]: {z!r} is listed twice")
            zones.add(zone_key(z))
        if self.enabled and not self.upstream:
            raise ValueError("upstream: required when dns is enabled (the resolver(s) to forward to)")
        if self.min_ttl_s > self.max_ttl_s:
            raise ValueError("min_ttl_s: must not exceed max_ttl_s")
        return self


def served_problem(served: list[str], limits: generated.ServedLimits) -> tuple[str, str] | None:
    """(field, message) when the served set is not acceptable address space, as the gateway judges it
    (perigee_squid::served): no /0, nothing around the IPv4-mapped range, at most `served_limits` of each
    family together."""
    nets = []
    for i, text in enumerate(served):
        net = parse_cidr(text)
        if net.prefixlen == 0:
            return f"served_subnets[{i}]", "a /0 is every address, never a served subnet"
        if isinstance(net, ipaddress.IPv6Network) and net.overlaps(V4_MAPPED):
            return f"served_subnets[{i}]", "overlaps ::ffff:0:0/96 (IPv4-mapped IPv6): write the IPv4 subnet itself"
        nets.append(net)
    v4 = [n for n in nets if isinstance(n, ipaddress.IPv4Network)]
    v6 = [n for n in nets if isinstance(n, ipaddress.IPv6Network)]
    for version, totals, max_prefix, name in (
        (4, [n.num_addresses for n in ipaddress.collapse_addresses(v4)], limits.ipv4_prefix, "ipv4_prefix"),
        (6, [n.num_addresses for n in ipaddress.collapse_addresses(v6)], limits.ipv6_prefix, "ipv6_prefix"),
    ):
        total = sum(totals)  # collapsed: nested and adjacent prefixes count once
        allowed = 2 ** ((32 if version == 4 else 128) - max_prefix)
        if total > allowed:
            return (
                "served_subnets",
                f"the IPv{version} served subnets cover {total:,} addresses together, more than one /{max_prefix} "
                f"({allowed:,}; raise served_limits.{name} if this gateway really serves that many)",
            )
    return None


# The site of clients no configured site covers (the gateway's OTHER_SITE): what a flow's `site` says then.
OTHER_SITE: str = default(Flow, "site")


class GatewayConfigRules(Strict):
    if TYPE_CHECKING:
        role: str
        served_subnets: list[str]
        served_limits: generated.ServedLimits
        splitter: generated.Splitter
        cache: generated.Cache
        dns: generated.Dns
        peer: generated.Peer
        classes: list[generated.TrafficClass]
        bypass: list[generated.BypassRule]
        sites: list[generated.Site]

    @model_validator(mode="after")
    def _cross_field(self) -> Self:
        tproxy = self.splitter.tproxy_port
        if self.cache.port == tproxy:
            raise ValueError("cache.port: conflicts with splitter.tproxy_port")
        if self.cache.admin_port == tproxy:
            raise ValueError("cache.admin_port: conflicts with splitter.tproxy_port")
        problem = served_problem(self.served_subnets, self.served_limits)
        if problem:
            raise ValueError(f"{problem[0]}: {problem[1]}")
        self._check_dns()
        if self.role == "terminal" and self.peer.enabled and not self.peer.hub:
            raise ValueError("peer.hub: required at a terminal with the peer path enabled")
        if self.role == "hub" and self.peer.hub:
            raise ValueError("peer.hub: only a terminal names its hub; leave it empty at a hub")
        if self.role == "hub" and self.peer.hub_fingerprints:
            raise ValueError("peer.hub_fingerprints: only a terminal pins its hub; leave it empty at a hub")
        if self.role == "terminal" and self.peer.enabled and not self.peer.hub_fingerprints:
            raise ValueError("peer.hub_fingerprints: required at a terminal with the peer path enabled")
        if self.role == "terminal" and self.peer.listen:
            raise ValueError("peer.listen: only a hub listens for the peer path; leave it empty at a terminal")
        if self.role == "terminal" and self.peer.terminals:
            raise ValueError("peer.terminals: only a hub enrolls terminals; leave it empty at a terminal")
        if self.role == "hub":
            for port, name in (
                (tproxy, "splitter.tproxy_port"),
                (self.cache.port, "cache.port"),
                (self.cache.admin_port, "cache.admin_port"),
            ):
                if self.peer.port == port:
                    raise ValueError(f"peer.port: already used by {name}")
        self._check_sites()
        for what, names in (("classes", [c.name for c in self.classes]), ("bypass", [r.name for r in self.bypass])):
            seen: set[str] = set()
            for name in names:
                if name in seen:
                    raise ValueError(f"{what}: duplicate name '{name}'")
                seen.add(name)
        return self

    def _check_sites(self) -> None:
        # As the gateway's validate_sites: OTHER_SITE is where clients no site covers count, and one
        # prefix (canonical already) belongs to one site.
        names: set[str] = set()
        owner: dict[str, str] = {}
        for i, site in enumerate(self.sites):
            if site.name == OTHER_SITE or site.name in names:
                raise ValueError(f"sites[{i}].name: duplicate or reserved site name '{site.name}'")
            names.add(site.name)
            for j, prefix in enumerate(site.prefixes):
                if prefix in owner:
                    where = f"sites[{i}].prefixes[{j}]"
                    raise ValueError(f"{where}: {prefix} is already a prefix of site '{owner[prefix]}'")
                owner[prefix] = site.name

    def _check_dns(self) -> None:
        if self.dns.enabled:
            for i, net in enumerate(self.served_subnets):
                if net.endswith("/0"):
                    raise ValueError(f"served_subnets[{i}]: a /0 would make the resolver open to everyone")
            for field, port in (
                ("splitter.tproxy_port", self.splitter.tproxy_port),
                ("cache.port", self.cache.port),
                ("cache.admin_port", self.cache.admin_port),
            ):
                if port == DNS_PORT:
                    raise ValueError(f"{field}: conflicts with the resolver (dns.enabled), which listens on port 53")
        # Squid's resolver is always explicit: the gateway's own, or the upstreams given.
        if self.cache.enabled and not self.dns.enabled:
            if not self.dns.upstream:
                raise ValueError(
                    "dns.upstream: the cache needs a resolver: enable dns or list the resolver(s) Squid should use"
                )
            for i, u in enumerate(self.dns.upstream):
                if parse_upstream(u)[1] != DNS_PORT:
                    raise ValueError(f"dns.upstream[{i}]: Squid can only use resolvers on port 53")

    def to_json(self) -> dict[str, Any]:
        """The config as the gateway takes it (JSON types, `schema` by its wire name)."""
        return self.model_dump(mode="json", by_alias=True)
