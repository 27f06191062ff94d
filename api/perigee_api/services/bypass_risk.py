"""What a bypass rule would switch off, named before it is stored.

A bypass rule leaves matching traffic alone: not split, not cached, not shaped per class. A rule that is too wide
quietly turns the appliance off for the traffic it covers, so these are named to the operator, who confirms them:
- bypasses_served: the rule covers all TCP (or all web TCP) of half or more of a served subnet, or of everything;
- host_as_network: an address with host bits under a prefix ("198.51.100.5/24"), stored as its network;
- duplicate: another rule matches exactly the same traffic; covered: another rule already bypasses all of it.
The same findings about stored rules are warnings of the policy check (`bypass_issues`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from perigee_api.schemas.gateway_config import BypassRule
from perigee_api.services.policy_check import Issue, cidrs_cover, ports_cover

Net = ipaddress.IPv4Network | ipaddress.IPv6Network

# The share of a served subnet a rule may cover before it is named.
MOST = 0.5
# Ports that carry most of what a served subnet sends: a rule covering them bypasses "most" of it.
WEB_PORTS = ("80", "443")


@dataclass(frozen=True)
class Risk:
    code: str
    message: str


def _collapsed(cidrs: Iterable[str]) -> list[Net]:
    nets = [ipaddress.ip_network(c, strict=False) for c in cidrs]
    v4 = [n for n in nets if isinstance(n, ipaddress.IPv4Network)]
    v6 = [n for n in nets if isinstance(n, ipaddress.IPv6Network)]
    return [*ipaddress.collapse_addresses(v4), *ipaddress.collapse_addresses(v6)]


def covered_share(rule_cidrs: list[str], subnet: str) -> float:
    """The share of `subnet`'s addresses that `rule_cidrs` contains (an empty list contains everything)."""
    s = ipaddress.ip_network(subnet, strict=False)
    if not rule_cidrs:
        return 1.0
    covered = 0
    for n in _collapsed(rule_cidrs):
        if n.version != s.version:
            continue
        if s.subnet_of(n):  # type: ignore[arg-type]
            return 1.0
        if n.subnet_of(s):  # type: ignore[arg-type]
            covered += n.num_addresses
    return covered / s.num_addresses


def _covers_tcp(rule: BypassRule) -> str | None:
    """What TCP the rule takes: 'all TCP', 'web TCP (80, 443)', or None when it leaves TCP alone."""
    if rule.protocol not in ("tcp", "any"):
        return None
    if not rule.ports:
        return "all TCP" if rule.protocol == "tcp" else "all traffic"
    web = [p for p in WEB_PORTS if ports_cover(rule.ports, [p])]
    return f"TCP to port {', '.join(web)}" if web else None


def served_risks(rule: BypassRule, served: list[str]) -> list[Risk]:
    what = _covers_tcp(rule)
    if what is None:
        return []
    if not rule.cidrs or any(ipaddress.ip_network(c, strict=False).prefixlen == 0 for c in rule.cidrs):
        return [
            Risk(
                "bypasses_served",
                f"'{rule.name}' matches {what} of every address: nothing the gateway serves would be accelerated "
                "or cached any more",
            )
        ]
    out = []
    for subnet in served:
        share = covered_share(rule.cidrs, subnet)
        if share >= MOST:
            amount = "all" if share >= 1 else f"{share:.0%}"
            out.append(
                Risk(
                    "bypasses_served",
                    f"'{rule.name}' matches {what} of {amount} of the served subnet {subnet}: those clients' "
                    "connections would no longer be accelerated or cached",
                )
            )
    return out


def host_risks(raw_cidrs: list[str]) -> list[Risk]:
    out = []
    for raw in raw_cidrs:
        if "/" not in raw:
            continue
        addr, _, _prefix = raw.partition("/")
        try:
            net = ipaddress.ip_network(raw, strict=False)
            host = ipaddress.ip_address(addr)
        except ValueError:
            continue  # the model's validator names it
        if host != net.network_address:
            single = "/32" if net.version == 4 else "/128"
            out.append(
                Risk(
                    "host_as_network",
                    f"{raw} is a host address with a network prefix: it is stored as {net} "
                    f"({net.num_addresses:,} addresses); for the one host write {addr}{single}",
                )
            )
    return out


def _same(a: BypassRule, b: BypassRule) -> bool:
    return (
        a.protocol == b.protocol
        and set(_collapsed(a.cidrs)) == set(_collapsed(b.cidrs))
        and ports_cover(a.ports, b.ports)
        and ports_cover(b.ports, a.ports)
        and bool(a.ports) == bool(b.ports)
    )


def _covers(outer: BypassRule, inner: BypassRule) -> bool:
    if outer.protocol != "any" and outer.protocol != inner.protocol:
        return False
    if outer.ports and not (inner.ports and ports_cover(outer.ports, inner.ports)):
        return False
    return not outer.cidrs or bool(inner.cidrs and cidrs_cover(outer.cidrs, inner.cidrs))


def overlap_risks(rule: BypassRule, existing: list[BypassRule]) -> list[Risk]:
    for other in existing:
        if other.name == rule.name:
            continue
        if _same(other, rule):
            return [Risk("duplicate", f"'{rule.name}' matches exactly what rule '{other.name}' matches")]
    for other in existing:
        if other.name != rule.name and _covers(other, rule):
            return [Risk("covered", f"rule '{other.name}' already bypasses everything '{rule.name}' matches")]
    return []


def bypass_risks(rule: BypassRule, raw_cidrs: list[str], existing: list[BypassRule], served: list[str]) -> list[Risk]:
    """Everything the operator should confirm before `rule` is added next to `existing`."""
    return [*served_risks(rule, served), *host_risks(raw_cidrs), *overlap_risks(rule, existing)]


def bypass_issues(bypass: list[BypassRule], served: list[str]) -> list[Issue]:
    """The policy check's warnings about stored rules (built-in ones are what they are)."""
    issues = []
    for i, rule in enumerate(bypass):
        if rule.builtin:
            continue
        for risk in [*served_risks(rule, served), *overlap_risks(rule, bypass[:i])]:
            issues.append(Issue("warning", risk.code, risk.message, (rule.name,)))
    return issues
