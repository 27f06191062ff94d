"""Contract: the API's GatewayConfig model and the real gateway's validator accept exactly the same configs,
and write an accepted one back the same way.

Every case is a full config (the API's default plus one edit) with the outcome we intend; it is checked
by GatewayConfig.model_validate and by `perigee config check --canonical FILE` (the gateway's own parser and
validator, offline, no root). Both must give the intended answer, and for an accepted config the same
canonical document (defaults written out, host bits cleared, ...): the API recognises the config a gateway
runs by comparing them. Build the gateway first (`make -C gateway build`; the root `make test` does).
"""

from __future__ import annotations

import copy
import json
import subprocess
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from perigee_api.schemas.gateway_config import GatewayConfig, default_config
from perigee_fakes.lab_config import lab_config

PERIGEE = Path(__file__).resolve().parents[2] / "gateway" / "target" / "release" / "perigee"
OK, BAD = True, False
Mutate = Callable[[dict[str, Any]], None]
MISSING = object()


def base() -> dict[str, Any]:
    cfg = lab_config("hub").to_json()
    cfg["classes"] = [
        {
            "name": "web",
            "priority": 100,
            "match": {"src": ["10.71.1.0/24"], "protocol": "tcp", "dports": ["80", "8000-8080"]},
            "action": "accelerate",
            "satellite": {"congestion_control": "hybla", "buffer_bytes": 0, "pacing_rate_bps": 0},
        }
    ]
    cfg["bypass"].append({"name": "vpn", "builtin": False, "protocol": "any", "cidrs": ["203.0.113.7/32"]})
    cfg["cache"]["refresh_patterns"] = [
        {"regex": r"\.(deb|rpm)$", "min_minutes": 1440, "percent": 100, "max_minutes": 10080}
    ]
    return cfg


def at(path: str, value: Any) -> Mutate:
    """Set (or with MISSING delete) the value at a dotted path; numeric parts index lists."""

    def mutate(cfg: dict[str, Any]) -> None:
        parts = path.split(".")
        cur: Any = cfg
        for p in parts[:-1]:
            cur = cur[int(p)] if isinstance(cur, list) else cur[p]
        last = parts[-1]
        if isinstance(cur, list):
            cur[int(last)] = value
        elif value is MISSING:
            del cur[last]
        else:
            cur[last] = value

    return mutate


def both(*ms: Mutate) -> Mutate:
    def mutate(cfg: dict[str, Any]) -> None:
        for m in ms:
            m(cfg)

    return mutate


def bounds(path: str, lo: int, hi: int, *, lo_ok: bool = True) -> list[tuple[str, bool, Mutate]]:
    """min, max and just outside, plus the wrong JSON types for an integer field."""
    out = [
        (f"{path}={lo}", OK if lo_ok else BAD, at(path, lo)),
        (f"{path}={hi}", OK, at(path, hi)),
        (f"{path}={lo - 1}", BAD, at(path, lo - 1)),
        (f"{path}={hi + 1}", BAD, at(path, hi + 1)),
        (f"{path} as string", BAD, at(path, str(hi))),
        (f"{path} as float", BAD, at(path, float(hi))),
        (f"{path} as bool", BAD, at(path, True)),
        (f"{path} null", BAD, at(path, None)),
    ]
    return out


def ip_cases(path: str) -> list[tuple[str, bool, Mutate]]:
    return [
        (f"{path} v6", OK, at(path, "fd71:9::/64")),
        (f"{path} bare address", OK, at(path, "10.71.9.1")),
        (f"{path} host bits", OK, at(path, "10.71.9.1/24")),
        (f"{path} /33", BAD, at(path, "10.71.9.0/33")),
        (f"{path} /129", BAD, at(path, "fd71:9::/129")),
        (f"{path} netmask", BAD, at(path, "10.71.9.0/255.255.255.0")),
        (f"{path} plus sign", BAD, at(path, "10.71.9.0/+24")),
        (f"{path} empty prefix", BAD, at(path, "10.71.9.0/")),
        (f"{path} leading zero octet", BAD, at(path, "010.71.9.0/24")),
        (f"{path} scope id", BAD, at(path, "fe80::1%lan0")),
        (f"{path} space", BAD, at(path, " 10.71.9.0/24")),
        (f"{path} garbage", BAD, at(path, "10.71.9/24")),
        (f"{path} number", BAD, at(path, 10)),
    ]


def port_cases(path: str) -> list[tuple[str, bool, Mutate]]:
    return [
        (f"{path} 1", OK, at(path, "1")),
        (f"{path} 65535", OK, at(path, "65535")),
        (f"{path} range", OK, at(path, "1000-2000")),
        (f"{path} one-port range", OK, at(path, "443-443")),
        (f"{path} leading zeros", OK, at(path, "00080")),
        (f"{path} 0", BAD, at(path, "0")),
        (f"{path} 65536", BAD, at(path, "65536")),
        (f"{path} reversed", BAD, at(path, "2000-1000")),
        (f"{path} six digits", BAD, at(path, "000080")),
        (f"{path} plus", BAD, at(path, "+80")),
        (f"{path} space", BAD, at(path, " 80")),
        (f"{path} arabic digits", BAD, at(path, "٨٠")),
        (f"{path} int", BAD, at(path, 80)),
        (f"{path} open range", BAD, at(path, "80-")),
    ]


def name_cases(path: str) -> list[tuple[str, bool, Mutate]]:
    return [
        (f"{path} 64 chars", OK, at(path, "a" * 64)),
        (f"{path} 65 chars", BAD, at(path, "a" * 65)),
        (f"{path} dots and dashes", OK, at(path, "a.b-c_d")),
        (f"{path} leading dash", BAD, at(path, "-web")),
        (f"{path} leading underscore", BAD, at(path, "_web")),
        (f"{path} empty", BAD, at(path, "")),
        (f"{path} space", BAD, at(path, "a b")),
        (f"{path} non-ascii", BAD, at(path, "wéb")),
    ]


def many(n: int, item: Callable[[int], Any]) -> list[Any]:
    return [item(i) for i in range(n)]


def v4(i: int) -> str:
    return f"10.{i // 256}.{i % 256}.0/24"


FP1, FP2, FP3 = ("sha256:" + c * 64 for c in "123")
T1 = {"name": "site-1", "fingerprints": [FP1], "prefixes": ["10.71.1.0/24"]}
T2 = {"name": "site-2", "fingerprints": [FP2], "prefixes": ["10.72.0.0/16"]}
NESTED = ["10.71.0.0/16", "10.71.1.0/24"]
PINS = [FP1, FP2]


def terminal_peer(peer: dict[str, Any]) -> Mutate:
    """The base config as a terminal, with this `peer` section."""
    return both(at("role", "terminal"), at("peer", peer))


CASES: list[tuple[str, bool, Mutate]] = [
    ("base", OK, lambda c: None),
    ("lab terminal", OK, lambda c: c.update(lab_config("terminal").to_json())),
    ("first proposal, hub", OK, lambda c: c.update(default_config("hub").to_json())),
    ("first proposal, terminal", OK, lambda c: c.update(default_config("terminal").to_json())),
    (
        "minimal document",
        OK,
        lambda c: [c.pop(k) for k in list(c) if k not in ("role", "interfaces", "served_subnets")],
    ),
    # top level
    ("unknown top-level field", BAD, at("surprise", 1)),
    ("schema 2", BAD, at("schema", 2)),
    ("schema true", BAD, at("schema", True)),
    ("schema 1.0", BAD, at("schema", 1.0)),
    ("schema_ (python name)", BAD, both(at("schema", MISSING), at("schema_", 1))),
    ("revision 64 chars", OK, at("revision", "v" * 64)),
    ("revision 65 chars", BAD, at("revision", "v" * 65)),
    ("revision absent", OK, at("revision", MISSING)),
    ("revision null", BAD, at("revision", None)),
    ("revision with space", BAD, at("revision", "v 1")),
    ("revision with colon", OK, at("revision", "api:v1.2-x_y")),
    ("role satellite", BAD, at("role", "satellite")),
    ("role missing", BAD, at("role", MISSING)),
    ("role number", BAD, at("role", 1)),
    # interfaces
    ("lan empty", BAD, at("interfaces.lan", [])),
    ("lan 16", OK, at("interfaces.lan", many(16, lambda i: f"lan{i}"))),
    ("lan 17", BAD, at("interfaces.lan", many(17, lambda i: f"lan{i}"))),
    ("lan duplicate", BAD, at("interfaces.lan", ["lan0", "lan0"])),
    ("ifname 15 chars", OK, at("interfaces.lan", ["a" * 15])),
    ("ifname 16 chars", BAD, at("interfaces.lan", ["a" * 16])),
    ("ifname odd chars ok", OK, at("interfaces.lan", ["br-x.10@a:b_c"])),
    ("ifname slash", BAD, at("interfaces.lan", ["a/b"])),
    ("ifname newline", BAD, at("interfaces.lan", ["lan0\n"])),
    ("satellite is lan", BAD, at("interfaces.satellite", "lan0")),
    ("satellite empty", BAD, at("interfaces.satellite", "")),
    ("interfaces unknown field", BAD, at("interfaces.wan", "x")),
    ("interfaces missing", BAD, at("interfaces", MISSING)),
    # served subnets
    ("served empty", BAD, at("served_subnets", [])),
    ("served missing", BAD, at("served_subnets", MISSING)),
    ("served 256", OK, at("served_subnets", many(256, v4))),
    ("served 257", BAD, at("served_subnets", many(257, v4))),
    ("served /0 cache off", BAD, at("served_subnets", ["0.0.0.0/0"])),
    ("served /0 cache on", BAD, both(at("served_subnets", ["10.0.0.0/8", "::/0"]), at("cache.enabled", True))),
    # as address space, with the cache on or off
    ("served v4 halves", BAD, at("served_subnets", ["0.0.0.0/1", "128.0.0.0/1"])),
    ("served v6 halves", BAD, both(at("served_subnets", ["::/1", "8000::/1"]), at("cache.enabled", True))),
    ("served two /8", BAD, at("served_subnets", ["10.0.0.0/8", "11.0.0.0/8"])),
    ("served one /8 in halves", OK, at("served_subnets", ["10.0.0.0/9", "10.128.0.0/9"])),
    ("served nested count once", OK, at("served_subnets", ["10.0.0.0/8", "10.1.0.0/16", "10.1.2.3"])),
    ("served one /32 of v6", OK, at("served_subnets", ["2001:db8::/32"])),
    ("served v6 over /32", BAD, at("served_subnets", ["2001:db8::/31"])),
    ("served v4-mapped /96", BAD, both(at("served_subnets", ["::ffff:0:0/96"]), at("cache.enabled", True))),
    ("served v4-mapped /120", BAD, at("served_subnets", ["::ffff:10.71.1.0/120"])),
    ("served around v4-mapped", BAD, at("served_subnets", ["10.71.1.0/24", "::/64"])),
    ("served NAT64 prefix", OK, at("served_subnets", ["64:ff9b::/96"])),
    ("RFC 1918 over the default", BAD, at("served_subnets", ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"])),
    (
        "RFC 1918 with a wider limit",
        OK,
        both(
            at("served_subnets", ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]),
            at("served_limits", {"ipv4_prefix": 7}),
        ),
    ),
    ("served_limits empty", OK, at("served_limits", {})),
    ("served_limits v4 1", OK, at("served_limits", {"ipv4_prefix": 1})),
    ("served_limits v4 0", BAD, at("served_limits", {"ipv4_prefix": 0})),
    ("served_limits v4 33", BAD, at("served_limits", {"ipv4_prefix": 33})),
    ("served_limits v6 64", OK, at("served_limits", {"ipv6_prefix": 64})),
    ("served_limits v6 65 under a /64", BAD, at("served_limits", {"ipv6_prefix": 65})),
    (
        "served_limits v6 128",
        OK,
        both(at("served_subnets", ["10.71.1.0/24", "fd71:1::1"]), at("served_limits", {"ipv6_prefix": 128})),
    ),
    ("served_limits v6 129", BAD, at("served_limits", {"ipv6_prefix": 129})),
    ("served_limits v4 true", BAD, at("served_limits", {"ipv4_prefix": True})),
    ("served_limits v4 8.0", BAD, at("served_limits", {"ipv4_prefix": 8.0})),
    ('served_limits v4 "8"', BAD, at("served_limits", {"ipv4_prefix": "8"})),
    ("served_limits unknown", BAD, at("served_limits", {"ipv4": 8})),
    ("class src v4-mapped", BAD, at("classes.0.match.src", ["::ffff:10.71.1.0/120"])),
    ("bypass v4-mapped", BAD, at("bypass.5.cidrs", ["::ffff:203.0.113.7"])),
    *ip_cases("served_subnets.0"),
    # splitter
    ("splitter disabled", OK, at("splitter.enabled", False)),
    ("splitter enabled as 1", BAD, at("splitter.enabled", 1)),
    ("splitter enabled as string", BAD, at("splitter.enabled", "true")),
    ("splitter unknown field", BAD, at("splitter.tproxy_pot", 1)),
    ("splitter empty object", OK, at("splitter", {})),
    *bounds("splitter.tproxy_port", 1, 65535),
    *bounds("splitter.max_flows", 1, 1_000_000),
    *bounds("splitter.connect_timeout_ms", 100, 600_000),
    *bounds("splitter.idle_timeout_s", 1, 604_800),
    *bounds("splitter.relay_buffer_bytes", 4096, 64 * 1024 * 1024),
    # satellite
    *[(f"cc {cc}", OK, at("satellite.congestion_control", cc)) for cc in ("hybla", "hybla_ld", "cubic", "bbr", "reno")],
    ("cc vegas", BAD, at("satellite.congestion_control", "vegas")),
    ("cc empty", BAD, at("satellite.congestion_control", "")),
    ("cc uppercase", BAD, at("satellite.congestion_control", "HYBLA")),
    # terrestrial
    *[(f"terrestrial cc {cc}", OK, at("terrestrial.congestion_control", cc)) for cc in ("", "cubic", "bbr")],
    ("terrestrial cc vegas", BAD, at("terrestrial.congestion_control", "vegas")),
    ("terrestrial cc null", BAD, at("terrestrial.congestion_control", None)),
    ("terrestrial missing", OK, at("terrestrial", MISSING)),
    ("terrestrial empty object", OK, at("terrestrial", {})),
    ("terrestrial unknown field", BAD, at("terrestrial.cc", "cubic")),
    *bounds("satellite.sndbuf_bytes", 0, 1 << 30),
    *bounds("satellite.rcvbuf_bytes", 0, 1 << 30),
    *bounds("satellite.pacing_rate_bps", 0, 100_000_000_000),
    *bounds("satellite.initcwnd", 0, 1000),
    *bounds("satellite.initrwnd", 0, 1000),
    ("routes none", OK, at("satellite.routes", [])),
    ("routes 256", OK, at("satellite.routes", many(256, lambda i: {"dst": v4(i), "via": "10.71.2.1"}))),
    ("routes 257", BAD, at("satellite.routes", many(257, lambda i: {"dst": v4(i), "via": "10.71.2.1"}))),
    ("route family mismatch", BAD, at("satellite.routes.0.via", "fd71:2::1")),
    ("route via cidr", BAD, at("satellite.routes.0.via", "10.71.2.1/32")),
    ("route via scope id", BAD, at("satellite.routes.1", {"dst": "fd71:1::/64", "via": "fe80::1%sat0"})),
    ("route duplicate", BAD, at("satellite.routes.1", {"dst": "10.71.1.0/24", "via": "10.71.2.1"})),
    ("route duplicate host bits", BAD, at("satellite.routes.1", {"dst": "10.71.1.9/24", "via": "10.71.2.1"})),
    ("route unknown field", BAD, at("satellite.routes.0", {"dst": "10.71.1.0/24", "via": "10.71.2.1", "dev": "x"})),
    ("route missing via", BAD, at("satellite.routes.0", {"dst": "10.71.1.0/24"})),
    *ip_cases("satellite.routes.0.dst")[4:],
    # hybla
    *bounds("hybla.rtt0_ms", 1, 10_000),
    *bounds("hybla.base_rtt_ms", 0, 10_000),
    *bounds("hybla.cwnd_max", 0, 65536),
    ("hybla empty", OK, at("hybla", {})),
    ("hybla unknown field", BAD, at("hybla.rho", 1)),
    # shaping
    ("shaping missing", OK, at("shaping", MISSING)),
    ("shaping empty", OK, at("shaping", {})),
    ("shaping enabled without rate", BAD, at("shaping", {"enabled": True})),
    ("shaping enabled rate 0", BAD, at("shaping", {"enabled": True, "rate_bps": 0})),
    ("shaping enabled", OK, at("shaping", {"enabled": True, "rate_bps": 1_536_000})),
    ("shaping disabled keeps a rate", OK, at("shaping", {"enabled": False, "rate_bps": 50_000_000})),
    ("shaping enabled as 1", BAD, at("shaping", {"enabled": 1, "rate_bps": 1_536_000})),
    ("shaping enabled null", BAD, at("shaping", {"enabled": None})),
    ("shaping unknown field", BAD, at("shaping", {"rate": 1_536_000})),
    *[
        (name, ok, both(at("shaping", {"enabled": True, "rate_bps": 1_536_000}), m))
        for name, ok, m in (
            *bounds("shaping.rate_bps", 8_000, 100_000_000_000),
            *bounds("shaping.overhead_bytes", 0, 256),
            *bounds("shaping.queue_packets", 16, 100_000),
        )
    ],
    ("shaping disabled rate 7999", BAD, at("shaping", {"rate_bps": 7_999})),
    ("shaping disabled rate 0", OK, at("shaping", {"rate_bps": 0})),
    # splitter.nodelay
    ("splitter nodelay false", OK, at("splitter.nodelay", False)),
    ("splitter nodelay missing", OK, at("splitter.nodelay", MISSING)),
    ("splitter nodelay as 1", BAD, at("splitter.nodelay", 1)),
    ("splitter nodelay null", BAD, at("splitter.nodelay", None)),
    # quic
    ("quic fallback", OK, at("quic", "fallback")),
    ("quic pass", OK, at("quic", "pass")),
    ("quic missing", OK, at("quic", MISSING)),
    ("quic block", BAD, at("quic", "block")),
    # sites (per-site stats)
    ("sites one", OK, at("sites", [{"name": "ship-7", "prefixes": ["10.72.7.0/24", "fd72:7::/64"]}])),
    (
        "sites nested prefixes",
        OK,
        at("sites", [{"name": "r", "prefixes": ["10.72.0.0/16"]}, {"name": "s", "prefixes": ["10.72.7.0/24"]}]),
    ),
    ("sites host bits", OK, at("sites", [{"name": "s", "prefixes": ["10.72.7.9/24"]}])),
    ("sites 1024", OK, at("sites", many(1024, lambda i: {"name": f"s{i}", "prefixes": [v4(i)]}))),
    ("sites 1025", BAD, at("sites", many(1025, lambda i: {"name": f"s{i}", "prefixes": [v4(i)]}))),
    ("sites other reserved", BAD, at("sites", [{"name": "other", "prefixes": ["10.72.0.0/16"]}])),
    (
        "sites duplicate name",
        BAD,
        at("sites", [{"name": "a", "prefixes": ["10.72.0.0/16"]}, {"name": "a", "prefixes": ["10.73.0.0/16"]}]),
    ),
    (
        "sites prefix in two",
        BAD,
        at("sites", [{"name": "a", "prefixes": ["10.72.0.0/16"]}, {"name": "b", "prefixes": ["10.72.9.9/16"]}]),
    ),
    ("sites no prefix", BAD, at("sites", [{"name": "a", "prefixes": []}])),
    ("sites 257 prefixes", BAD, at("sites", [{"name": "a", "prefixes": many(257, v4)}])),
    ("sites bad prefix", BAD, at("sites", [{"name": "a", "prefixes": ["10.72.0.0/33"]}])),
    ("sites unknown field", BAD, at("sites", [{"name": "a", "prefixes": ["10.72.0.0/16"], "vlan": 7}])),
    ("sites name missing", BAD, at("sites", [{"prefixes": ["10.72.0.0/16"]}])),
    ("sites null", BAD, at("sites", None)),
    # a class's DSCP
    ("set_dscp 46", OK, at("classes.0.set_dscp", 46)),
    ("set_dscp 0", OK, at("classes.0.set_dscp", 0)),
    ("set_dscp 63", OK, at("classes.0.set_dscp", 63)),
    ("set_dscp null", OK, at("classes.0.set_dscp", None)),
    ("set_dscp 64", BAD, at("classes.0.set_dscp", 64)),
    ("set_dscp -1", BAD, at("classes.0.set_dscp", -1)),
    ("set_dscp string", BAD, at("classes.0.set_dscp", "46")),
    # the link's rates (utilisation, alerts)
    *bounds("satellite.forward_rate_bps", 0, 100_000_000_000),
    *bounds("satellite.return_rate_bps", 0, 100_000_000_000),
    ("quic null", BAD, at("quic", None)),
    ("quic bool", BAD, at("quic", True)),
    # peer (the base config is a hub)
    ("peer missing", OK, at("peer", MISSING)),
    ("peer empty", OK, at("peer", {})),
    ("peer hub enabled, nobody enrolled", OK, at("peer", {"enabled": True})),
    ("peer hub enrolls a terminal", OK, at("peer", {"enabled": True, "listen": ["10.71.2.2"], "terminals": [T1]})),
    ("peer hub enrolls two", OK, at("peer", {"terminals": [T1, {**T2, "prefixes": ["10.72.1.0/24"]}]})),
    ("peer terminal two keys", OK, at("peer", {"terminals": [{**T1, "fingerprints": [FP1, FP2]}]})),
    ("peer terminal three keys", BAD, at("peer", {"terminals": [{**T1, "fingerprints": [FP1, FP2, FP3]}]})),
    ("peer terminal no key", BAD, at("peer", {"terminals": [{**T1, "fingerprints": []}]})),
    ("peer terminal bad key", BAD, at("peer", {"terminals": [{**T1, "fingerprints": ["sha256:" + "A" * 64]}]})),
    ("peer terminal no prefix", BAD, at("peer", {"terminals": [{**T1, "prefixes": []}]})),
    ("peer terminal /0", BAD, at("peer", {"terminals": [{**T1, "prefixes": ["0.0.0.0/0"]}]})),
    ("peer terminal name", BAD, at("peer", {"terminals": [{**T1, "name": "-x"}]})),
    ("peer terminal unknown field", BAD, at("peer", {"terminals": [{**T1, "vlan": 7}]})),
    ("peer terminals same name", BAD, at("peer", {"terminals": [T1, {**T2, "name": "site-1"}]})),
    ("peer terminals same key", BAD, at("peer", {"terminals": [T1, {**T2, "fingerprints": [FP1]}]})),
    ("peer terminals overlap", BAD, at("peer", {"terminals": [T1, {**T2, "prefixes": ["10.71.0.0/16"]}]})),
    ("peer terminal overlaps itself", BAD, at("peer", {"terminals": [{**T1, "prefixes": NESTED}]})),
    ("peer terminal v4 and v6", OK, at("peer", {"terminals": [{**T1, "prefixes": ["10.71.1.0/24", "fd71:1::/64"]}]})),
    ("peer listen v6", OK, at("peer", {"listen": ["fd71:2::2"]})),
    ("peer listen 0.0.0.0", BAD, at("peer", {"listen": ["0.0.0.0"]})),  # noqa: S104
    ("peer listen multicast", BAD, at("peer", {"listen": ["ff02::1"]})),
    ("peer listen twice", BAD, at("peer", {"listen": ["10.71.2.2", "10.71.2.2"]})),
    ("peer listen name", BAD, at("peer", {"listen": ["hub.example"]})),
    ("peer listen 17", BAD, at("peer", {"listen": many(17, lambda i: f"10.71.2.{i + 1}")})),
    ("peer shared key is gone", BAD, at("peer", {"key": "00" * 32})),
    ("peer allowed is gone", BAD, at("peer", {"allowed": []})),
    ("peer hub at a hub", BAD, at("peer", {"hub": "10.71.2.2"})),
    ("peer hub pins at a hub", BAD, at("peer", {"hub_fingerprints": [FP1]})),
    ("peer terminal enabled", OK, terminal_peer({"enabled": True, "hub_fingerprints": [FP1], "hub": "10.71.2.2"})),
    ("peer terminal v6 hub", OK, terminal_peer({"enabled": True, "hub_fingerprints": [FP1], "hub": "fd71:2::2"})),
    ("peer terminal pins a cluster", OK, terminal_peer({"enabled": True, "hub": "10.9.2.2", "hub_fingerprints": PINS})),
    ("peer terminal pins twice", BAD, terminal_peer({"hub_fingerprints": [FP1, FP1]})),
    ("peer terminal bad pin", BAD, terminal_peer({"hub_fingerprints": ["sha1:00"]})),
    ("peer terminal enabled without hub", BAD, terminal_peer({"enabled": True, "hub_fingerprints": [FP1]})),
    ("peer terminal enabled without pin", BAD, terminal_peer({"enabled": True, "hub": "10.71.2.2"})),
    ("peer terminal disabled without pin", OK, terminal_peer({"hub": "10.71.2.2"})),
    ("peer terminal listens", BAD, terminal_peer({"listen": ["10.71.2.1"]})),
    ("peer terminal enrolls", BAD, terminal_peer({"terminals": [T1]})),
    ("peer terminal hub name", BAD, terminal_peer({"hub": "hub.example"})),
    ("peer terminal hub with port", BAD, terminal_peer({"hub": "10.71.2.2:7072"})),
    ("peer terminal hub 0.0.0.0", BAD, terminal_peer({"hub": "0.0.0.0"})),  # noqa: S104
    ("peer terminal hub ::", BAD, terminal_peer({"hub": "::"})),
    ("peer terminal hub loopback", BAD, terminal_peer({"hub": "127.0.0.1"})),
    ("peer terminal hub multicast", BAD, terminal_peer({"hub": "ff02::1"})),
    ("peer terminal hub leading zero", BAD, terminal_peer({"hub": "10.071.2.2"})),
    ("peer terminal hub scope id", BAD, terminal_peer({"hub": "fe80::1%sat0"})),
    ("peer terminal port = tproxy", OK, terminal_peer({"port": 7071})),
    ("peer hub port = tproxy", BAD, at("peer", {"port": 7071})),
    ("peer hub port = cache", BAD, at("peer", {"port": 3129})),
    ("peer hub port = cache admin", BAD, at("peer", {"port": 3130})),
    ("peer unknown field", BAD, at("peer", {"pool": 8})),
    ("peer enabled as 1", BAD, at("peer", {"enabled": 1})),
    *[
        (name, ok, both(at("peer", {}), m))
        for name, ok, m in [*bounds("peer.port", 1, 65535), *bounds("peer.pool_size", 1, 256)]
    ],
    *[
        (name, ok, both(at("peer", {"redundancy": {}}), m))
        for name, ok, m in [
            *bounds("peer.redundancy.forward_bytes", 0, 16 << 20),
            *bounds("peer.redundancy.return_bytes", 0, 16 << 20),
            *bounds("peer.redundancy.link_ms", 0, 600),
        ]
    ],
    ("peer redundancy unknown field", BAD, at("peer", {"redundancy": {"bytes": 1}})),
    # egress
    ("egress missing", OK, at("egress", MISSING)),
    ("egress lists", OK, at("egress", {"allow": ["10.9.9.9/32", "fd00::/8"], "deny": ["192.168.0.0/16"]})),
    ("egress bad cidr", BAD, at("egress", {"deny": ["192.168.0.0/33"]})),
    ("egress unknown field", BAD, at("egress", {"block": []})),
    ("egress deny 256", OK, at("egress", {"deny": many(256, v4)})),
    ("egress deny 257", BAD, at("egress", {"deny": many(257, v4)})),
    # classes
    ("classes 512", OK, at("classes", many(512, lambda i: {"name": f"c{i}", "priority": i, "action": "accelerate"}))),
    ("classes 513", BAD, at("classes", many(513, lambda i: {"name": f"c{i}", "priority": i, "action": "accelerate"}))),
    ("class minimal", OK, at("classes", [{"name": "m", "priority": 1, "action": "bypass"}])),
    ("class without priority", BAD, at("classes", [{"name": "m", "action": "bypass"}])),
    ("class without action", BAD, at("classes", [{"name": "m", "priority": 1}])),
    ("class action zap", BAD, at("classes.0.action", "zap")),
    *bounds("classes.0.priority", 0, 65535),
    *name_cases("classes.0.name"),
    ("class name default", BAD, at("classes.0.name", "default")),
    ("class duplicate name", BAD, lambda c: c["classes"].append(dict(c["classes"][0], priority=5))),
    ("class unknown field", BAD, at("classes.0.prio", 1)),
    ("match unknown field", BAD, at("classes.0.match.port", "80")),
    ("match empty", OK, at("classes.0.match", {})),
    ("match protocol missing with ports", OK, at("classes.0.match.protocol", MISSING)),
    ("match protocol null", BAD, at("classes.0.match.protocol", None)),
    ("match protocol any with ports", BAD, at("classes.0.match.protocol", "any")),
    ("match protocol any no ports", OK, both(at("classes.0.match.protocol", "any"), at("classes.0.match.dports", []))),
    ("match protocol udp", OK, at("classes.0.match.protocol", "udp")),
    ("match protocol icmp", BAD, at("classes.0.match.protocol", "icmp")),
    ("cache class tcp", OK, at("classes.0.action", "cache")),
    ("cache class udp", BAD, both(at("classes.0.action", "cache"), at("classes.0.match.protocol", "udp"))),
    ("cache class no protocol", OK, both(at("classes.0.action", "cache"), at("classes.0.match.protocol", MISSING))),
    *ip_cases("classes.0.match.src.0"),
    ("match src 256", OK, at("classes.0.match.src", many(256, v4))),
    ("match src 257", BAD, at("classes.0.match.src", many(257, v4))),
    ("match dst 257", BAD, at("classes.0.match.dst", many(257, v4))),
    *port_cases("classes.0.match.dports.0"),
    ("match dports 256", OK, at("classes.0.match.dports", many(256, lambda i: str(i + 1)))),
    ("match dports 257", BAD, at("classes.0.match.dports", many(257, lambda i: str(i + 1)))),
    ("match sports 257", BAD, at("classes.0.match.sports", many(257, lambda i: str(i + 1)))),
    ("match sports", OK, at("classes.0.match.sports", ["1024-65535"])),
    ("dscp 0 and 63", OK, at("classes.0.match.dscp", [0, 63])),
    ("dscp 64", BAD, at("classes.0.match.dscp", [64])),
    ("dscp -1", BAD, at("classes.0.match.dscp", [-1])),
    ("dscp string", BAD, at("classes.0.match.dscp", ["46"])),
    ("dscp 64 entries", OK, at("classes.0.match.dscp", many(64, lambda i: i % 64))),
    ("dscp 65 entries", BAD, at("classes.0.match.dscp", many(65, lambda i: i % 64))),
    ("iifname ok", OK, at("classes.0.match.iifname", ["lan0"])),
    ("iifname bad", BAD, at("classes.0.match.iifname", ["lan 0"])),
    ("iifname 16", OK, at("classes.0.match.iifname", many(16, lambda i: f"l{i}"))),
    ("iifname 17", BAD, at("classes.0.match.iifname", many(17, lambda i: f"l{i}"))),
    ("class cc null", OK, at("classes.0.satellite.congestion_control", None)),
    ("class cc empty", BAD, at("classes.0.satellite.congestion_control", "")),
    ("class cc vegas", BAD, at("classes.0.satellite.congestion_control", "vegas")),
    ("class cc hybla_ld", OK, at("classes.0.satellite.congestion_control", "hybla_ld")),
    ("class satellite empty", OK, at("classes.0.satellite", {})),
    ("class satellite unknown", BAD, at("classes.0.satellite.cwnd", 1)),
    *bounds("classes.0.satellite.buffer_bytes", 0, 1 << 30),
    *bounds("classes.0.satellite.pacing_rate_bps", 0, 100_000_000_000),
    # bypass
    ("bypass none", OK, at("bypass", [])),
    ("bypass 512", OK, at("bypass", many(512, lambda i: {"name": f"b{i}", "protocol": "esp"}))),
    ("bypass 513", BAD, at("bypass", many(513, lambda i: {"name": f"b{i}", "protocol": "esp"}))),
    *name_cases("bypass.5.name"),
    ("bypass duplicate name", BAD, at("bypass.1.name", "ipsec-esp")),
    ("bypass protocol gre", BAD, at("bypass.0.protocol", "gre")),
    ("bypass icmp", OK, at("bypass.0.protocol", "icmp")),
    ("bypass ports on esp", BAD, at("bypass.0.ports", ["500"])),
    ("bypass any without cidrs", BAD, at("bypass.5.cidrs", [])),
    ("bypass builtin as 0", BAD, at("bypass.0.builtin", 0)),
    ("bypass unknown field", BAD, at("bypass.0.comment", "x")),
    ("bypass cidrs 1024", OK, at("bypass.5.cidrs", many(1024, lambda i: f"10.{i // 256}.{i % 256}.1/32"))),
    ("bypass cidrs 1025", BAD, at("bypass.5.cidrs", many(1025, lambda i: f"10.{i // 256}.{i % 256}.1/32"))),
    ("bypass ports 256", OK, at("bypass.2.ports", many(256, lambda i: str(i + 1)))),
    ("bypass ports 257", BAD, at("bypass.2.ports", many(257, lambda i: str(i + 1)))),
    *ip_cases("bypass.5.cidrs.0")[3:],
    *port_cases("bypass.2.ports.0")[5:],
    # dns (the resolver crate's DnsConfig)
    ("dns missing", OK, at("dns", MISSING)),
    ("dns empty", OK, at("dns", {})),
    ("dns enabled", OK, at("dns.enabled", True)),
    ("dns enabled without upstream", BAD, at("dns", {"enabled": True})),
    ("dns enabled as 1", BAD, at("dns.enabled", 1)),
    ("dns unknown field", BAD, at("dns.upstreams", [])),
    ("dns upstream v6 and port", OK, at("dns.upstream", ["fd71:3::53", "10.71.3.54@5353", "127.0.0.1@5300"])),
    ("dns upstream written long", OK, at("dns.upstream", ["10.71.3.53@53", "FD71:3:0::53@05353"])),
    ("route via written long", OK, at("satellite.routes.1.via", "FD71:2:0::1")),
    ("served subnets written long", OK, at("served_subnets", ["10.71.1.9/24", "FD71:1:0:0::5/064"])),
    ("dns upstream 8", OK, at("dns.upstream", many(8, lambda i: f"192.0.2.{i + 1}"))),
    ("dns upstream 9", BAD, at("dns.upstream", many(9, lambda i: f"192.0.2.{i + 1}"))),
    ("dns upstream name", BAD, at("dns.upstream", ["resolver.example"])),
    ("dns upstream duplicate", BAD, at("dns.upstream", ["10.71.3.53", "10.71.3.53@53"])),
    ("dns upstream duplicate v6 spelling", BAD, at("dns.upstream", ["fd71:3::53", "FD71:3:0::53"])),
    ("dns upstream loopback 53", BAD, at("dns.upstream", ["127.0.0.2"])),
    ("dns upstream ::1 53", BAD, at("dns.upstream", ["::1@53"])),
    ("dns upstream mapped loopback", OK, at("dns.upstream", ["::ffff:127.0.0.1"])),
    ("dns upstream unspecified", BAD, at("dns.upstream", ["0.0.0.0"])),  # noqa: S104 (not a bind)
    ("dns upstream multicast v6", BAD, at("dns.upstream", ["ff02::fb"])),
    ("dns upstream multicast v4", BAD, at("dns.upstream", ["224.0.0.251"])),
    ("dns upstream port 0", BAD, at("dns.upstream", ["10.71.3.53@0"])),
    ("dns upstream port 65536", BAD, at("dns.upstream", ["10.71.3.53@65536"])),
    ("dns upstream port plus", BAD, at("dns.upstream", ["10.71.3.53@+53"])),
    ("dns upstream empty port", BAD, at("dns.upstream", ["10.71.3.53@"])),
    ("dns upstream scope id", BAD, at("dns.upstream", ["fe80::1%lan0"])),
    ("dns upstream space", BAD, at("dns.upstream", [" 10.71.3.53"])),
    ("dns upstream cidr", BAD, at("dns.upstream", ["10.71.3.53/32"])),
    ("dns upstream number", BAD, at("dns.upstream", [53])),
    *bounds("dns.cache_mb", 4, 16_384),
    *bounds("dns.stale_ttl_s", 60, 604_800),
    *bounds("dns.stale_reply_ttl_s", 1, 3_600),
    *bounds("dns.stale_client_timeout_ms", 0, 10_000),
    *bounds("dns.min_ttl_s", 0, 3_600),
    *bounds("dns.max_ttl_s", 60, 604_800),
    *bounds("dns.max_negative_ttl_s", 0, 86_400),
    *bounds("dns.client_qps_limit", 0, 100_000),
    *bounds("dns.probe_timeout_ms", 100, 30_000),
    ("dns min_ttl above max_ttl", BAD, both(at("dns.min_ttl_s", 3_600), at("dns.max_ttl_s", 600))),
    ("dns serve_stale string", BAD, at("dns.serve_stale", "yes")),
    ("dns intercept off", OK, both(at("dns.enabled", True), at("dns.intercept", False))),
    ("dns intercept_for v4 and v6", OK, at("dns.intercept_for", ["192.0.2.1", "2001:db8::53", "::ffff:127.0.0.1"])),
    ("dns intercept_for 16", OK, at("dns.intercept_for", many(16, lambda i: f"192.0.2.{i + 1}"))),
    ("dns intercept_for 17", BAD, at("dns.intercept_for", many(17, lambda i: f"192.0.2.{i + 1}"))),
    ("dns intercept_for loopback", BAD, at("dns.intercept_for", ["127.0.0.53"])),
    ("dns intercept_for ::1", BAD, at("dns.intercept_for", ["::1"])),
    ("dns intercept_for unspecified", BAD, at("dns.intercept_for", ["::"])),
    ("dns intercept_for multicast", BAD, at("dns.intercept_for", ["224.0.0.251"])),
    ("dns intercept_for duplicate v6 spelling", BAD, at("dns.intercept_for", ["2001:db8::53", "2001:DB8:0::53"])),
    ("dns intercept_for with port", BAD, at("dns.intercept_for", ["192.0.2.1@53"])),
    ("dns intercept_for name", BAD, at("dns.intercept_for", ["resolver.example"])),
    ("dns private_domains", OK, at("dns.private_domains", ["corp.example.com", "Lan.", "_srv.internal", "x"])),
    ("dns private_domains 64", OK, at("dns.private_domains", many(64, lambda i: f"z{i}.example"))),
    ("dns private_domains 65", BAD, at("dns.private_domains", many(65, lambda i: f"z{i}.example"))),
    ("dns private_domains duplicate spelling", BAD, at("dns.private_domains", ["corp.example", "CORP.example."])),
    ("dns private_domains root", BAD, at("dns.private_domains", ["."])),
    ("dns private_domains empty", BAD, at("dns.private_domains", [""])),
    ("dns private_domains empty label", BAD, at("dns.private_domains", ["a..b"])),
    ("dns private_domains space", BAD, at("dns.private_domains", ["corp example"])),
    ("dns private_domains quote", BAD, at("dns.private_domains", ['corp".example'])),
    ("dns private_domains label 64", BAD, at("dns.private_domains", ["a" * 64 + ".example"])),
    ("dns private_domains 253", OK, at("dns.private_domains", [".".join(["a" * 63] * 3 + ["b" * 61])])),
    ("dns private_domains 254", BAD, at("dns.private_domains", [".".join(["a" * 63] * 3 + ["b" * 62])])),
    ("dns private_domains 253 with dot", OK, at("dns.private_domains", [".".join(["a" * 63] * 3 + ["b" * 61]) + "."])),
    ("dns rebind_protection off", OK, at("dns.rebind_protection", False)),
    ("dns rebind_protection string", BAD, at("dns.rebind_protection", "no")),
    ("dns dnssec_validation off", OK, at("dns.dnssec_validation", False)),
    ("dns dnssec_validation number", BAD, at("dns.dnssec_validation", 0)),
    ("dns on, served /0", BAD, both(at("dns.enabled", True), at("served_subnets", ["10.0.0.0/8", "::/0"]))),
    ("dns off, served /0 (refused anyway: wider than the served limit)", BAD, at("served_subnets", ["::/0"])),
    ("dns on, tproxy 53", BAD, both(at("dns.enabled", True), at("splitter.tproxy_port", 53))),
    ("dns off, tproxy 53", OK, at("splitter.tproxy_port", 53)),
    ("dns on, cache port 53", BAD, both(at("dns.enabled", True), at("cache.port", 53))),
    ("dns on, cache admin_port 53", BAD, both(at("dns.enabled", True), at("cache.admin_port", 53))),
    ("cache on, no resolver", BAD, both(at("cache.enabled", True), at("dns", {}))),
    ("cache on, gateway resolver", OK, both(at("cache.enabled", True), at("dns.enabled", True))),
    ("cache on, upstream on 5353", BAD, both(at("cache.enabled", True), at("dns.upstream", ["10.71.3.53@5353"]))),
    (
        "cache on, dns on, upstream on 5353",
        OK,
        both(at("cache.enabled", True), at("dns", {"enabled": True, "upstream": ["10.71.3.53@5353"]})),
    ),
    ("cache off, no resolver", OK, at("dns", {})),
    # cache (the Squid crate's CacheConfig)
    ("cache empty", OK, at("cache", {})),
    ("cache enabled", OK, at("cache.enabled", True)),
    ("cache unknown field", BAD, at("cache.memroy_mb", 1)),
    *bounds("cache.port", 1, 65535),
    *bounds("cache.admin_port", 1, 65535),
    ("cache port == admin_port", BAD, both(at("cache.port", 4000), at("cache.admin_port", 4000))),
    ("cache port == tproxy", BAD, at("cache.port", 7071)),
    ("cache admin_port == tproxy", BAD, at("cache.admin_port", 7071)),
    ("cache port == tproxy when disabled too", BAD, both(at("cache.enabled", False), at("cache.port", 7071))),
    *bounds("cache.memory_mb", 0, 1024 * 1024),
    *bounds("cache.disk_mb", 0, 262_144),
    ("aufs disk 16 TiB", OK, both(at("cache.store", "aufs"), at("cache.disk_mb", 16 * 1024 * 1024))),
    ("aufs disk above 16 TiB", BAD, both(at("cache.store", "aufs"), at("cache.disk_mb", 16 * 1024 * 1024 + 1))),
    ("store ufs", BAD, at("cache.store", "ufs")),
    ("store Rock", BAD, at("cache.store", "Rock")),
    *bounds("cache.max_object_mb", 1, 1024 * 1024, lo_ok=False),  # 1 < default max_memory_object_mb 8
    (
        "max_object_mb 1 with small memory objects",
        OK,
        both(at("cache.max_object_mb", 1), at("cache.max_memory_object_mb", 1)),
    ),
    ("max_memory_object_mb 0", OK, at("cache.max_memory_object_mb", 0)),
    ("max_memory_object_mb = max_object_mb", OK, at("cache.max_memory_object_mb", 4096)),
    ("max_memory_object_mb > max_object_mb", BAD, at("cache.max_memory_object_mb", 4097)),
    ("max_memory_object_mb -1", BAD, at("cache.max_memory_object_mb", -1)),
    ("max_memory_object_mb string", BAD, at("cache.max_memory_object_mb", "8")),
    *bounds("cache.range_offset_limit_mb", -1, 1024 * 1024),
    ("collapsed_forwarding", OK, at("cache.collapsed_forwarding", True)),
    ("collapsed_forwarding string", BAD, at("cache.collapsed_forwarding", "yes")),
    (
        "never_cache domains",
        OK,
        at("cache.never_cache_domains", ["Bank.example", ".bank.example", "10.1.2.3", "a-b.c0"]),
    ),
    ("never_cache 4096", OK, at("cache.never_cache_domains", many(4096, lambda i: f"d{i}.example"))),
    ("never_cache 4097", BAD, at("cache.never_cache_domains", many(4097, lambda i: f"d{i}.example"))),
    ("never_cache wildcard", BAD, at("cache.never_cache_domains", ["*.example.com"])),
    ("never_cache space", BAD, at("cache.never_cache_domains", ["bad domain"])),
    ("never_cache empty", BAD, at("cache.never_cache_domains", [""])),
    ("never_cache lone dot", BAD, at("cache.never_cache_domains", ["."])),
    ("never_cache double dot", BAD, at("cache.never_cache_domains", ["a..b"])),
    ("never_cache trailing dot", BAD, at("cache.never_cache_domains", ["a.b."])),
    ("never_cache leading dash label", BAD, at("cache.never_cache_domains", ["-a.b"])),
    ("never_cache trailing dash label", BAD, at("cache.never_cache_domains", ["a-.b"])),
    ("never_cache underscore", BAD, at("cache.never_cache_domains", ["a_b.c"])),
    ("never_cache label 63", OK, at("cache.never_cache_domains", ["a" * 63 + ".b"])),
    ("never_cache label 64", BAD, at("cache.never_cache_domains", ["a" * 64 + ".b"])),
    ("never_cache 253", OK, at("cache.never_cache_domains", [".".join(["a" * 63] * 3 + ["a" * 61])])),
    ("never_cache 254", BAD, at("cache.never_cache_domains", [".".join(["a" * 63] * 3 + ["a" * 62])])),
    ("never_cache 253 after dot", OK, at("cache.never_cache_domains", ["." + ".".join(["a" * 63] * 3 + ["a" * 61])])),
    ("never_cache kelvin sign", BAD, at("cache.never_cache_domains", ["\u212aa.example"])),
    ("never_cache idn", BAD, at("cache.never_cache_domains", ["bücher.example"])),
    ("never_cache number", BAD, at("cache.never_cache_domains", [1])),
    ("refresh_patterns plain string", BAD, at("cache.refresh_patterns", [r"\.deb$"])),
    (
        "refresh 256",
        OK,
        at(
            "cache.refresh_patterns",
            many(256, lambda i: {"regex": f"x{i}", "min_minutes": 0, "percent": 0, "max_minutes": 0}),
        ),
    ),
    (
        "refresh 257",
        BAD,
        at(
            "cache.refresh_patterns",
            many(257, lambda i: {"regex": f"x{i}", "min_minutes": 0, "percent": 0, "max_minutes": 0}),
        ),
    ),
    (
        "refresh all fields",
        OK,
        at(
            "cache.refresh_patterns.0",
            {
                "regex": "^http://[^/]+/x\\?",
                "case_insensitive": False,
                "min_minutes": 0,
                "percent": 10000,
                "max_minutes": 525600,
                "options": ["override-expire", "max-stale=999999999"],
            },
        ),
    ),
    ("refresh unknown field", BAD, at("cache.refresh_patterns.0.bogus", 1)),
    ("refresh missing percent", BAD, at("cache.refresh_patterns.0.percent", MISSING)),
    ("refresh case_insensitive 1", BAD, at("cache.refresh_patterns.0.case_insensitive", 1)),
    ("refresh percent 10001", BAD, at("cache.refresh_patterns.0.percent", 10001)),
    ("refresh percent -1", BAD, at("cache.refresh_patterns.0.percent", -1)),
    ("refresh max 525601", BAD, at("cache.refresh_patterns.0.max_minutes", 525601)),
    ("refresh min > max", BAD, at("cache.refresh_patterns.0.min_minutes", 10081)),
    ("refresh min = max", OK, at("cache.refresh_patterns.0.min_minutes", 10080)),
    ("refresh option unknown", BAD, at("cache.refresh_patterns.0.options", ["ignore-everything"])),
    ("refresh option max-stale 10 digits", BAD, at("cache.refresh_patterns.0.options", ["max-stale=1234567890"])),
    ("refresh option max-stale empty", BAD, at("cache.refresh_patterns.0.options", ["max-stale="])),
    ("refresh option max-stale space", BAD, at("cache.refresh_patterns.0.options", ["max-stale=1 x"])),
    *[
        (f"refresh regex {r!r}", expect, at("cache.refresh_patterns.0.regex", r))
        for r, expect in [
            ("", BAD),
            ("x" * 512, OK),
            ("x" * 513, BAD),
            ("é" * 256, OK),  # 512 bytes
            ("é" * 257, BAD),  # 514 bytes, 257 characters
            ("a b", BAD),
            ("a\tb", BAD),
            ("a\u00a0b", BAD),  # no-break space
            ("a\u2028b", BAD),
            ("a\u200bb", OK),  # zero-width space is not whitespace
            ("a\x7fb", BAD),
            ("a#b", BAD),
            ("-i", BAD),
            ("([a-z]", BAD),
            ("a)", BAD),
            ("[a", BAD),
            ("a\\", BAD),
            ("[]a]", OK),
            ("[^]a]", OK),
            ("[[:space:]x]", OK),
            ("[[:space]", BAD),
            (r"a\(b", OK),
            (r"\.(deb|rpm)$", OK),
        ]
    ],
    # sysctls
    ("sysctls empty", OK, at("sysctls", {})),
    ("sysctl no_metrics_save", OK, at("sysctls", {"net.ipv4.tcp_no_metrics_save": "1"})),
    ("sysctl tcp_rmem with tabs", OK, at("sysctls", {"net.ipv4.tcp_rmem": "4096\t131072\t67108864"})),
    ("sysctl tcp_wmem with spaces", OK, at("sysctls", {"net.ipv4.tcp_wmem": "4096 16384 67108864"})),
    ("sysctl not allowed", BAD, at("sysctls", {"kernel.panic": "1"})),
    ("sysctl value empty", BAD, at("sysctls", {"net.ipv4.tcp_sack": ""})),
    ("sysctl value 64", OK, at("sysctls", {"net.core.default_qdisc": "f" * 64})),
    ("sysctl value 65", BAD, at("sysctls", {"net.core.default_qdisc": "f" * 65})),
    ("sysctl value newline", BAD, at("sysctls", {"net.ipv4.tcp_sack": "1\n"})),
    ("sysctl value semicolon", BAD, at("sysctls", {"net.ipv4.tcp_sack": "1;"})),
    ("sysctl value int", BAD, at("sysctls", {"net.ipv4.tcp_sack": 1})),
    ("sysctls list", BAD, at("sysctls", ["net.ipv4.tcp_sack"])),
]


def api_canonical(cfg: dict[str, Any]) -> dict[str, Any] | None:
    try:
        return GatewayConfig.model_validate(cfg).to_json()
    except ValidationError:
        return None


def gateway_canonical(cfg: dict[str, Any], tmp: Path, index: int) -> tuple[dict[str, Any] | None, str]:
    path = tmp / f"case{index}.json"
    path.write_text(json.dumps(cfg))
    r = subprocess.run(
        [str(PERIGEE), "config", "check", "--canonical", str(path)], capture_output=True, text=True, timeout=30
    )
    if r.returncode == 0:
        return json.loads(r.stdout), ""
    assert r.returncode == 1, f"perigee config check could not read the case: {r.stderr}"
    return None, r.stderr.strip()


def first_difference(a: Any, b: Any, path: str = "$") -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            d = first_difference(a.get(k), b.get(k), f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return next(
            (d for i, (x, y) in enumerate(zip(a, b, strict=True)) if (d := first_difference(x, y, f"{path}[{i}]"))),
            None,
        )
    return None if a == b and type(a) is type(b) else f"{path}: api {a!r}, gateway {b!r}"


def test_gateway_binary_is_built() -> None:
    assert PERIGEE.is_file(), f"{PERIGEE} is missing: run `make -C gateway build` first"


def test_cases_are_distinct() -> None:
    names = [name for name, _, _ in CASES]
    assert len(names) == len(set(names)), [n for n in names if names.count(n) > 1]


def test_api_and_gateway_agree_on_every_case() -> None:
    if not PERIGEE.is_file():
        pytest.fail(f"{PERIGEE} is missing: run `make -C gateway build` first")
    configs = []
    for _, _, mutate in CASES:
        cfg = copy.deepcopy(base())
        mutate(cfg)
        configs.append(cfg)
    with tempfile.TemporaryDirectory() as d, ThreadPoolExecutor(max_workers=4) as pool:
        gateway = list(pool.map(lambda ic: gateway_canonical(ic[1], Path(d), ic[0]), enumerate(configs)))
    problems = []
    for (name, expect, _), cfg, (gw_doc, gw_err) in zip(CASES, configs, gateway, strict=True):
        api_doc = api_canonical(cfg)
        api_ok, gw_ok = api_doc is not None, gw_doc is not None
        if not (api_ok == gw_ok == expect):
            problems.append(f"{name}: intended {expect}, api {api_ok}, gateway {gw_ok} {gw_err}")
        elif api_ok and (diff := first_difference(api_doc, gw_doc)):
            problems.append(f"{name}: canonical forms differ at {diff}")
    assert not problems, f"{len(problems)} of {len(CASES)} cases disagree:\n" + "\n".join(problems)
    assert len(CASES) > 300
