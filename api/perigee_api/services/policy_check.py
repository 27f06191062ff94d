"""Finds overlaps and contradictions between traffic classes.

Classes are evaluated by priority (lower first), first match wins. Reported:
- duplicate_name (error): two classes share a name.
- contradiction (error): same priority, overlapping match, different actions (the winner is undefined).
- shadowed (warning): a class whose whole match is covered by one class that is evaluated earlier
  (strictly lower priority number), so it can never match.
- shadowed_by_bypass (warning): an accelerate/cache class fully covered by a bypass rule (bypass wins).
An empty list in a match dimension means "any".
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal

from perigee_api.schemas.gateway_config import BypassRule, Match, TrafficClass, parse_port_spec

Net = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Issue:
    severity: Literal["error", "warning"]
    code: str
    message: str
    classes: tuple[str, ...]


# --- set algebra on one dimension each ---------------------------------------------------------------


def _nets(values: list[str]) -> list[Net]:
    return [ipaddress.ip_network(v, strict=False) for v in values]


def cidrs_overlap(a: list[str], b: list[str]) -> bool:
    if not a or not b:
        return True
    return any(x.version == y.version and x.overlaps(y) for x in _nets(a) for y in _nets(b))


def cidrs_cover(outer: list[str], inner: list[str]) -> bool:
    """True when every address matched by `inner` is matched by `outer`."""
    if not outer:
        return True
    if not inner:
        return False
    outs = _nets(outer)
    return all(any(o.version == n.version and n.subnet_of(o) for o in outs) for n in _nets(inner))  # type: ignore[arg-type]


def _ranges(values: list[str]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(parse_port_spec(v) for v in values):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def ports_overlap(a: list[str], b: list[str]) -> bool:
    if not a or not b:
        return True
    return any(lo1 <= hi2 and lo2 <= hi1 for lo1, hi1 in _ranges(a) for lo2, hi2 in _ranges(b))


def ports_cover(outer: list[str], inner: list[str]) -> bool:
    if not outer:
        return True
    if not inner:
        return False
    outs = _ranges(outer)
    return all(any(olo <= lo and hi <= ohi for olo, ohi in outs) for lo, hi in _ranges(inner))


def _set_overlap(a: list[int] | list[str], b: list[int] | list[str]) -> bool:
    return not a or not b or bool(set(a) & set(b))


def _set_cover(outer: list[int] | list[str], inner: list[int] | list[str]) -> bool:
    return not outer or (bool(inner) and set(inner) <= set(outer))


def _proto_overlap(a: str, b: str) -> bool:
    return a == "any" or b == "any" or a == b


def _proto_cover(outer: str, inner: str) -> bool:
    return outer == "any" or outer == inner


def matches_overlap(a: Match, b: Match) -> bool:
    return (
        _proto_overlap(a.protocol, b.protocol)
        and cidrs_overlap(a.src, b.src)
        and cidrs_overlap(a.dst, b.dst)
        and ports_overlap(a.dports, b.dports)
        and ports_overlap(a.sports, b.sports)
        and _set_overlap(a.dscp, b.dscp)
        and _set_overlap(a.iifname, b.iifname)
    )


def match_covers(outer: Match, inner: Match) -> bool:
    return (
        _proto_cover(outer.protocol, inner.protocol)
        and cidrs_cover(outer.src, inner.src)
        and cidrs_cover(outer.dst, inner.dst)
        and ports_cover(outer.dports, inner.dports)
        and ports_cover(outer.sports, inner.sports)
        and _set_cover(outer.dscp, inner.dscp)
        and _set_cover(outer.iifname, inner.iifname)
    )


def _bypass_covers(rule: BypassRule, m: Match) -> bool:
    """A bypass rule matches when protocol and port fit and either endpoint is in its CIDRs."""
    if not _proto_cover(rule.protocol, m.protocol):
        return False
    if rule.ports and not (ports_cover(rule.ports, m.dports) or ports_cover(rule.ports, m.sports)):
        return False
    return not rule.cidrs or cidrs_cover(rule.cidrs, m.src) or cidrs_cover(rule.cidrs, m.dst)


def check_classes(classes: list[TrafficClass], bypass: list[BypassRule] | None = None) -> list[Issue]:
    issues: list[Issue] = []
    seen: dict[str, int] = {}
    for c in classes:
        seen[c.name] = seen.get(c.name, 0) + 1
    for name, count in seen.items():
        if count > 1:
            issues.append(Issue("error", "duplicate_name", f"class name '{name}' is used {count} times", (name,)))

    ordered = sorted(classes, key=lambda c: c.priority)
    for i, a in enumerate(ordered):
        for b in ordered[i + 1 :]:
            if a.name == b.name:
                continue
            if a.priority == b.priority:
                if a.action != b.action and matches_overlap(a.match, b.match):
                    issues.append(
                        Issue(
                            "error",
                            "contradiction",
                            f"classes '{a.name}' ({a.action}) and '{b.name}' ({b.action}) have the same "
                            f"priority {a.priority} and overlapping matches: which one wins is undefined",
                            (a.name, b.name),
                        )
                    )
            elif match_covers(a.match, b.match):
                issues.append(
                    Issue(
                        "warning",
                        "shadowed",
                        f"class '{b.name}' (priority {b.priority}) never matches: class '{a.name}' "
                        f"(priority {a.priority}) matches everything it does",
                        (b.name, a.name),
                    )
                )
    for c in classes:
        if c.action == "bypass":
            continue
        for rule in bypass or []:
            if _bypass_covers(rule, c.match):
                issues.append(
                    Issue(
                        "warning",
                        "shadowed_by_bypass",
                        f"class '{c.name}' ({c.action}) is covered by bypass rule '{rule.name}': "
                        "bypassed flows are never split or cached",
                        (c.name,),
                    )
                )
                break
    # A class shadowed twice is reported once per shadowing class; keep that: each names its cause.
    return issues
