"""GatewayConfig as specified in docs/control-protocol.md (unknown fields rejected).

Shared by the API (validating the desired config) and the fake gateway (validating like the real one).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

IFNAME_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")
NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
SYSCTL_ALLOW = frozenset(
    {
        "net.ipv4.tcp_slow_start_after_idle",
        "net.ipv4.tcp_no_metrics_save",
        "net.ipv4.tcp_window_scaling",
        "net.ipv4.tcp_sack",
        "net.ipv4.tcp_timestamps",
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
        "net.core.rmem_max",
        "net.core.wmem_max",
        "net.ipv4.tcp_notsent_lowat",
        "net.ipv4.tcp_mtu_probing",
        "net.ipv4.tcp_ecn",
        "net.core.default_qdisc",
        "net.ipv4.tcp_fastopen",
        "net.ipv4.tcp_adv_win_scale",
        "net.ipv4.ip_forward",
        "net.ipv6.conf.all.forwarding",
    }
)


def _cidr(value: str) -> str:
    try:
        net = ipaddress.ip_network(value, strict=False)
    except ValueError:
        raise ValueError(f"'{value}' is not an IPv4 or IPv6 address or CIDR") from None
    return str(net)


def _ip(value: str) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise ValueError(f"'{value}' is not an IPv4 or IPv6 address") from None


def parse_port_spec(value: str) -> tuple[int, int]:
    """'443' -> (443, 443); '1000-2000' -> (1000, 2000); raises ValueError otherwise."""
    m = re.fullmatch(r"(\d{1,5})(?:-(\d{1,5}))?", value)
    if not m:
        raise ValueError(f"'{value}' is not a port or an inclusive range like '1000-2000'")
    lo = int(m.group(1))
    hi = int(m.group(2)) if m.group(2) else lo
    if not (1 <= lo <= 65535 and 1 <= hi <= 65535):
        raise ValueError(f"'{value}': ports must be within 1-65535")
    if lo > hi:
        raise ValueError(f"'{value}': range start is above its end")
    return lo, hi


def _port(value: str) -> str:
    lo, hi = parse_port_spec(value)
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _ifname(value: str) -> str:
    if not IFNAME_RE.fullmatch(value):
        raise ValueError(f"'{value}' is not a valid interface name (1-15 of A-Z a-z 0-9 _ . : @ -)")
    return value


Cidr = Annotated[str, Field(max_length=64), AfterValidator(_cidr)]
IpAddr = Annotated[str, Field(max_length=64), AfterValidator(_ip)]
PortSpec = Annotated[str, Field(max_length=11), AfterValidator(_port)]
IfName = Annotated[str, Field(max_length=15), AfterValidator(_ifname)]
Name = Annotated[str, Field(pattern=NAME_RE)]
CongestionControl = Literal["hybla", "cubic", "bbr", "reno"]
Action = Literal["accelerate", "cache", "bypass"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Interfaces(Strict):
    lan: list[IfName] = Field(min_length=1, max_length=16)
    satellite: IfName

    @model_validator(mode="after")
    def _distinct(self) -> Interfaces:
        if len(set(self.lan)) != len(self.lan):
            raise ValueError("lan: duplicate interface")
        if self.satellite in self.lan:
            raise ValueError(f"satellite: '{self.satellite}' is also listed as a LAN interface")
        return self


class Splitter(Strict):
    enabled: bool = True
    tproxy_port: int = Field(default=7071, ge=1, le=65535)
    max_flows: int = Field(default=10000, ge=1, le=1_000_000)
    connect_timeout_ms: int = Field(default=10000, ge=100, le=600_000)
    idle_timeout_s: int = Field(default=600, ge=1, le=86400 * 7)
    relay_buffer_bytes: int = Field(default=262144, ge=4096, le=64 * 1024 * 1024)


class Route(Strict):
    dst: Cidr
    via: IpAddr

    @model_validator(mode="after")
    def _same_family(self) -> Route:
        if ipaddress.ip_network(self.dst).version != ipaddress.ip_address(self.via).version:
            raise ValueError("dst and via must be the same address family")
        return self


class Satellite(Strict):
    congestion_control: CongestionControl = "hybla"
    sndbuf_bytes: int = Field(default=4194304, ge=0, le=1 << 30, description="0 = kernel autotuning")
    rcvbuf_bytes: int = Field(default=4194304, ge=0, le=1 << 30, description="0 = kernel autotuning")
    pacing_rate_bps: int = Field(default=0, ge=0, le=100_000_000_000)
    initcwnd: int = Field(default=10, ge=0, le=1000, description="0 = kernel default")
    initrwnd: int = Field(default=10, ge=0, le=1000, description="0 = kernel default")
    routes: list[Route] = Field(default_factory=list, max_length=256)

    @model_validator(mode="after")
    def _unique_routes(self) -> Satellite:
        dsts = [r.dst for r in self.routes]
        if len(set(dsts)) != len(dsts):
            raise ValueError("routes: duplicate dst")
        return self


class Hybla(Strict):
    rtt0_ms: int = Field(default=25, ge=1, le=10000)
    base_rtt_ms: int = Field(default=0, ge=0, le=10000)


class Match(Strict):
    src: list[Cidr] = Field(default_factory=list, max_length=256)
    dst: list[Cidr] = Field(default_factory=list, max_length=256)
    protocol: Literal["tcp", "udp", "any"] = "tcp"
    dports: list[PortSpec] = Field(default_factory=list, max_length=256)
    sports: list[PortSpec] = Field(default_factory=list, max_length=256)
    dscp: list[Annotated[int, Field(ge=0, le=63)]] = Field(default_factory=list, max_length=64)
    iifname: list[IfName] = Field(default_factory=list, max_length=16)

    @model_validator(mode="after")
    def _ports_need_l4(self) -> Match:
        if self.protocol == "any" and (self.dports or self.sports):
            raise ValueError("ports need protocol tcp or udp")
        return self


class ClassSatellite(Strict):
    congestion_control: CongestionControl | None = None  # None = inherit
    buffer_bytes: int = Field(default=0, ge=0, le=1 << 30)
    pacing_rate_bps: int = Field(default=0, ge=0, le=100_000_000_000)


class TrafficClass(Strict):
    name: Name
    priority: int = Field(ge=0, le=65535)
    match: Match = Field(default_factory=Match)
    action: Action
    satellite: ClassSatellite = Field(default_factory=ClassSatellite)

    @model_validator(mode="after")
    def _cache_is_tcp(self) -> TrafficClass:
        if self.name == "default":
            raise ValueError("name: 'default' is reserved")
        if self.action == "cache" and self.match.protocol != "tcp":
            raise ValueError("action 'cache' needs protocol 'tcp'")
        return self


class BypassRule(Strict):
    name: Name
    builtin: bool = False
    protocol: Literal["tcp", "udp", "esp", "ah", "icmp", "any"]
    cidrs: list[Cidr] = Field(default_factory=list, max_length=1024)
    ports: list[PortSpec] = Field(default_factory=list, max_length=256)

    @model_validator(mode="after")
    def _ports_need_l4(self) -> BypassRule:
        if self.ports and self.protocol not in ("tcp", "udp"):
            raise ValueError("ports need protocol tcp or udp")
        if self.protocol == "any" and not self.cidrs:
            raise ValueError("protocol 'any' needs cidrs (it would bypass everything)")
        return self


class Cache(Strict):
    enabled: bool = False
    port: int = Field(default=3129, ge=1, le=65535)
    memory_mb: int = Field(default=256, ge=8, le=1024 * 1024)
    disk_mb: int = Field(default=2048, ge=0, le=64 * 1024 * 1024)
    store: Literal["rock", "aufs", "ufs"] = "rock"
    max_object_mb: int = Field(default=4096, ge=1, le=1024 * 1024)
    never_cache_domains: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9.*-]{1,253}$")]] = Field(
        default_factory=list, max_length=1024
    )
    refresh_patterns: list[Annotated[str, Field(max_length=256)] | dict[str, Any]] = Field(
        default_factory=list, max_length=256
    )
    collapsed_forwarding: bool = False
    range_offset_limit_mb: int = Field(default=-1, ge=-1, le=1024 * 1024)


def _sysctls(value: dict[str, str]) -> dict[str, str]:
    for key, val in value.items():
        if key not in SYSCTL_ALLOW:
            raise ValueError(f"sysctl '{key}' is not allow-listed")
        if not re.fullmatch(r"[A-Za-z0-9 _.-]{1,64}", val):
            raise ValueError(f"sysctl '{key}': value '{val}' has characters outside [A-Za-z0-9 _.-]")
    return value


class GatewayConfig(Strict):
    schema_: Literal[1] = Field(default=1, alias="schema")
    revision: str = Field(default="", max_length=64, pattern=r"^[A-Za-z0-9_.:-]*$")
    role: Literal["hub", "terminal"]
    interfaces: Interfaces
    served_subnets: list[Cidr] = Field(min_length=1, max_length=256)
    splitter: Splitter = Field(default_factory=Splitter)
    satellite: Satellite = Field(default_factory=Satellite)
    hybla: Hybla = Field(default_factory=Hybla)
    classes: list[TrafficClass] = Field(default_factory=list, max_length=512)
    bypass: list[BypassRule] = Field(default_factory=list, max_length=512)
    cache: Cache = Field(default_factory=Cache)
    sysctls: Annotated[dict[str, str], AfterValidator(_sysctls)] = Field(default_factory=dict)

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _unique_bypass_names(self) -> GatewayConfig:
        if self.cache.enabled and self.cache.port == self.splitter.tproxy_port:
            raise ValueError("cache.port: conflicts with splitter.tproxy_port")
        seen: set[str] = set()
        for rule in self.bypass:
            if rule.name in seen:
                raise ValueError(f"bypass: duplicate rule name '{rule.name}'")
            seen.add(rule.name)
        return self

    def to_json(self) -> dict[str, object]:
        return self.model_dump(mode="json", by_alias=True)


BUILTIN_BYPASS: tuple[BypassRule, ...] = (
    BypassRule(name="ipsec-esp", builtin=True, protocol="esp"),
    BypassRule(name="ipsec-ah", builtin=True, protocol="ah"),
    BypassRule(name="ike", builtin=True, protocol="udp", ports=["500"]),
    BypassRule(name="nat-t", builtin=True, protocol="udp", ports=["4500"]),
    BypassRule(name="ike-tcp", builtin=True, protocol="tcp", ports=["4500"]),
)
BUILTIN_NAMES = frozenset(r.name for r in BUILTIN_BYPASS)


def default_config(role: str = "hub") -> GatewayConfig:
    """The first desired config, matching the satlab addressing in DEVELOPERS.md."""
    if role == "terminal":
        routes = [Route(dst="10.71.3.0/24", via="10.71.2.2"), Route(dst="fd71:3::/64", via="fd71:2::2")]
        served = ["10.71.1.0/24", "fd71:1::/64"]
    else:
        routes = [Route(dst="10.71.1.0/24", via="10.71.2.1"), Route(dst="fd71:1::/64", via="fd71:2::1")]
        served = ["10.71.1.0/24", "fd71:1::/64"]
    return GatewayConfig(
        role="terminal" if role == "terminal" else "hub",
        interfaces=Interfaces(lan=["lan0"], satellite="sat0"),
        served_subnets=served,
        satellite=Satellite(routes=routes),
        bypass=list(BUILTIN_BYPASS),
        sysctls={"net.ipv4.tcp_slow_start_after_idle": "0"},
    )
