"""GatewayConfig as specified in docs/control-protocol.md (unknown fields rejected).

Shared by the API (validating the desired config) and the fake gateway (validating like the real one).
It accepts exactly what the gateway's validator accepts (gateway/crates/perigee/src/gateway/config.rs,
for `cache` gateway/crates/squid/src/config.rs and for `dns` gateway/crates/dns/src/config.rs): same
types (strict: no "80" for 80, no 1.0 for 1, no 0/1 for booleans), defaults, limits and cross-field
checks. tests/test_config_contract.py proves it against the real `perigee config check`.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

IFNAME_RE = re.compile(r"[A-Za-z0-9_.:@-]{1,15}")
NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
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


def _parse_ip(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    # Python also takes IPv6 scope ids ("fe80::1%eth0"); the gateway (and the kernel routes) do not.
    if "%" in value:
        raise ValueError(f"'{value}' is not an IPv4 or IPv6 address (no scope ids)")
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        raise ValueError(f"'{value}' is not an IPv4 or IPv6 address") from None


V4_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")


def parse_cidr(value: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    """'10.0.0.0/8', 'fd00::/8' or a bare address; the prefix length is 1-3 ASCII digits (no netmasks).

    IPv4-mapped IPv6 prefixes (inside ::ffff:0:0/96) are refused: no IPv4 packet carries one, so a rule on
    them would match nothing (and in Squid's ACL, every IPv4 client)."""
    addr_s, slash, prefix_s = value.partition("/")
    addr = _parse_ip(addr_s)
    if not slash:
        net = ipaddress.ip_network(addr)
    elif not re.fullmatch(r"[0-9]{1,3}", prefix_s) or int(prefix_s) > addr.max_prefixlen:
        raise ValueError(f"'{value}': bad prefix length")
    else:
        net = ipaddress.ip_network((addr, int(prefix_s)), strict=False)
    if isinstance(net, ipaddress.IPv6Network) and net.subnet_of(V4_MAPPED):
        raise ValueError(f"'{value}' is IPv4-mapped IPv6 (::ffff:0:0/96): write the IPv4 address or subnet itself")
    return net


def _cidr(value: str) -> str:
    return str(parse_cidr(value))


def _ip(value: str) -> str:
    return str(_parse_ip(value))


def parse_port_spec(value: str) -> tuple[int, int]:
    """'443' -> (443, 443); '1000-2000' -> (1000, 2000); raises ValueError otherwise."""
    m = re.fullmatch(r"([0-9]{1,5})(?:-([0-9]{1,5}))?", value)
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
CongestionControl = Literal["hybla", "hybla_ld", "cubic", "bbr", "reno"]
CWND_CEILING_MAX = 65536  # perigee_hybla::MAX_CWND_CEILING
Action = Literal["accelerate", "cache", "bypass"]


class Strict(BaseModel):
    # strict: JSON types as the gateway's serde sees them (no "80" for 80, no 1.0 for 1, no 0/1 for bool).
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


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
    relay_buffer_bytes: int = Field(
        default=1048576,
        ge=4096,
        le=64 * 1024 * 1024,
        description="per flow and direction, the bytes held inside the gateway (pipe capacity, at most 1 MiB)",
    )
    nodelay: bool = Field(
        default=True,
        description="TCP_NODELAY on both legs of every relayed flow and the peer path's connections, so no "
        "small segment waits a satellite round trip for an ACK (Nagle); false = the kernel's default",
    )


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


class Terrestrial(Strict):
    congestion_control: CongestionControl | Literal[""] = Field(
        default="",
        description="the terrestrial leg's congestion control; empty = the system default",
    )


class Hybla(Strict):
    rtt0_ms: int = Field(default=25, ge=1, le=10000)
    base_rtt_ms: int = Field(default=0, ge=0, le=10000)
    cwnd_max: int = Field(
        default=0,
        ge=0,
        le=CWND_CEILING_MAX,
        description="cwnd ceiling in segments for Perigee's BPF Hybla; 0 = none (the kernel's hybla needs 0)",
    )


SHAPING_MIN_BPS = 8_000
SHAPING_MAX_BPS = 100_000_000_000


class Shaping(Strict):
    """Aggregate egress shaper on the satellite interface (an HTB class at rate_bps over a FIFO):
    caps the sum of every flow leaving toward the satellite, so they cannot overflow the modem's queue."""

    enabled: bool = Field(default=False, description="false = the interface keeps its own qdisc")
    rate_bps: int = Field(
        default=0,
        ge=0,
        le=SHAPING_MAX_BPS,
        description=f"the satellite link's rate for what this gateway sends, bit/s counted over whole frames; "
        f"{SHAPING_MIN_BPS}..{SHAPING_MAX_BPS}, 0 = none (required when enabled)",
    )
    overhead_bytes: int = Field(
        default=0, ge=0, le=256, description="bytes the modem adds to each packet, charged against the rate"
    )
    queue_packets: int = Field(default=1000, ge=16, le=100_000, description="the gateway's own queue (FIFO) in packets")

    @model_validator(mode="after")
    def _rate(self) -> Shaping:
        if 0 < self.rate_bps < SHAPING_MIN_BPS:
            raise ValueError(f"rate_bps: must be {SHAPING_MIN_BPS}..{SHAPING_MAX_BPS} bit/s (0 = none)")
        if self.enabled and self.rate_bps == 0:
            raise ValueError("rate_bps: required when shaping is enabled")
        return self


class ServedLimits(Strict):
    """The most address space the served subnets may cover together (the gateway's perigee_squid::served)."""

    ipv4_prefix: int = Field(
        default=8, ge=1, le=32, description="IPv4 served subnets together: at most one /N of addresses (8: 16,777,216)"
    )
    ipv6_prefix: int = Field(default=32, ge=1, le=128, description="IPv6 served subnets together: at most one /N")


def served_problem(served: list[str], limits: ServedLimits) -> tuple[str, str] | None:
    """(field, message) when the served set is not acceptable address space, as the gateway judges it."""
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


PEER_KEY_RE = re.compile(r"[0-9A-Fa-f]{64}")
QuicPolicy = Literal["pass", "fallback"]
# The one place the API's default QUIC policy is chosen (the gateway's DEFAULT_QUIC mirrors it).
DEFAULT_QUIC: QuicPolicy = "fallback"


def _peer_hub(value: str) -> str:
    if value == "":
        return value
    try:
        addr = _parse_ip(value)
    except ValueError:
        raise ValueError(f"'{value}' is not an IPv4/IPv6 address literal") from None
    if addr.is_unspecified or addr.is_multicast or addr.is_loopback:
        raise ValueError("must be the hub's unicast address")
    return value


def _peer_key(value: str) -> str:
    if value and not PEER_KEY_RE.fullmatch(value):
        raise ValueError("must be 64 hex digits (32 random bytes, e.g. `openssl rand -hex 32`)")
    return value


class Peer(Strict):
    """The peer path: a terminal keeps warm, authenticated connections to its hub and starts new flows on
    them, so a client's first bytes cross the satellite without a handshake first (docs/splitter.md)."""

    enabled: bool = False
    port: int = Field(default=7072, ge=1, le=65535, description="hub: its peer listener; terminal: the hub's")
    hub: Annotated[str, Field(max_length=64), AfterValidator(_peer_hub)] = Field(
        default="", description="terminal: the hub's address (an IP literal); empty at a hub"
    )
    key: Annotated[str, Field(max_length=64), AfterValidator(_peer_key)] = Field(
        default="", description="the shared secret, 64 hex digits; required when enabled"
    )
    allowed: list[Cidr] = Field(
        default_factory=list, max_length=256, description="hub: CIDRs terminals may connect from; empty = any"
    )
    pool_size: int = Field(default=8, ge=1, le=256, description="terminal: warm connections each worker keeps ready")

    @model_validator(mode="after")
    def _key_when_enabled(self) -> Peer:
        if self.enabled and not self.key:
            raise ValueError("key: required when the peer path is enabled")
        return self


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


# --- cache: the Squid crate's CacheConfig (gateway/crates/squid/src/config.rs) -----------------

MAX_ROCK_MB = 262_144  # rock addresses 2^24 slots of 16 KiB
MAX_AUFS_MB = 16 * 1024 * 1024
MAX_REFRESH_MINUTES = 525_600  # one year
REFRESH_FLAG_OPTIONS = (
    "override-expire",
    "override-lastmod",
    "reload-into-ims",
    "ignore-reload",
    "ignore-no-store",
    "ignore-private",
    "refresh-ims",
    "store-stale",
)


def _regex_balance_problem(regex: str) -> str | None:
    """The gateway's structural check: brackets and parentheses balance, no trailing backslash."""
    depth, in_class, i, n = 0, False, 0, len(regex)
    while i < n:
        c = regex[i]
        i += 1
        if c == "\\":
            if i >= n:
                return "ends with a lone backslash"
            i += 1
        elif c == "[" and not in_class:
            in_class = True
            if i < n and regex[i] == "^":  # a ']' right after '[' or '[^' is a literal member
                i += 1
            if i < n and regex[i] == "]":
                i += 1
        elif c == "[" and in_class:
            if i < n and regex[i] in ":.=":  # POSIX class like [:space:]
                kind = regex[i]
                i += 1
                closed = False
                while i < n:
                    x = regex[i]
                    i += 1
                    if x == kind and i < n and regex[i] == "]":
                        i += 1
                        closed = True
                        break
                if not closed:
                    return "unterminated [: :] class"
        elif c == "]" and in_class:
            in_class = False
        elif c == "(" and not in_class:
            depth += 1
        elif c == ")" and not in_class:
            depth -= 1
            if depth < 0:
                return "unmatched ')'"
    if in_class:
        return "unmatched '['"
    if depth:
        return "unmatched '('"
    return None


def _refresh_regex(value: str) -> str:
    if not 1 <= len(value.encode()) <= 512:
        raise ValueError("must be 1-512 bytes")
    if any(c.isspace() or unicodedata.category(c) == "Cc" or c == "#" for c in value):
        raise ValueError("must not contain whitespace, control characters or '#' (squid.conf has no quoting)")
    if value.startswith("-"):
        raise ValueError("must not start with '-' (read as an option by Squid)")
    problem = _regex_balance_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _refresh_option(value: str) -> str:
    if value in REFRESH_FLAG_OPTIONS or re.fullmatch(r"max-stale=[0-9]{1,9}", value):
        return value
    raise ValueError(f"unknown option {value!r}; allowed: {', '.join(REFRESH_FLAG_OPTIONS)}, max-stale=N")


def normalize_domain(value: str) -> str:
    """The gateway's rule: an IPv4 literal, or a hostname (optional leading dot, labels of [A-Za-z0-9-])."""
    try:
        ipaddress.IPv4Address(value)
        if re.fullmatch(r"[0-9.]+", value):
            return value
    except ValueError:
        pass
    # No str.lower(): it folds non-ASCII letters (KELVIN SIGN -> 'k') that the gateway refuses.
    trimmed = value[1:] if value.startswith(".") else value
    if not 1 <= len(trimmed.encode()) <= 253:
        raise ValueError("must be a hostname of 1-253 characters")
    for label in trimmed.split("."):
        if not re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?", label):
            raise ValueError(f"{value!r} is not a hostname (letters, digits, '-' and '.' only)")
    return value


class RefreshPattern(Strict):
    regex: Annotated[str, AfterValidator(_refresh_regex)] = Field(description="POSIX extended regex on the URL")
    case_insensitive: bool = True
    min_minutes: int = Field(ge=0, le=MAX_REFRESH_MINUTES)
    percent: int = Field(ge=0, le=10_000)
    max_minutes: int = Field(ge=0, le=MAX_REFRESH_MINUTES)
    options: list[Annotated[str, AfterValidator(_refresh_option)]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _min_below_max(self) -> RefreshPattern:
        if self.min_minutes > self.max_minutes:
            raise ValueError("min_minutes: must not exceed max_minutes")
        return self


class Cache(Strict):
    enabled: bool = False
    port: int = Field(default=3129, ge=1, le=65535)
    admin_port: int = Field(default=3130, ge=1, le=65535, description="loopback-only cache manager / PURGE port")
    memory_mb: int = Field(default=256, ge=0, le=1024 * 1024)
    disk_mb: int = Field(default=2048, ge=0, le=MAX_AUFS_MB, description=f"0 = memory only; rock at most {MAX_ROCK_MB}")
    store: Literal["rock", "aufs"] = "rock"
    max_object_mb: int = Field(default=4096, ge=1, le=1024 * 1024)
    max_memory_object_mb: int = Field(default=8, ge=0, le=1024 * 1024, description="at most max_object_mb")
    never_cache_domains: list[Annotated[str, AfterValidator(normalize_domain)]] = Field(
        default_factory=list, max_length=4096
    )
    refresh_patterns: list[RefreshPattern] = Field(default_factory=list, max_length=256)
    collapsed_forwarding: bool = False
    range_offset_limit_mb: int = Field(default=-1, ge=-1, le=1024 * 1024)

    @model_validator(mode="after")
    def _consistent(self) -> Cache:
        if self.admin_port == self.port:
            raise ValueError("admin_port: must differ from cache.port")
        if self.store == "rock" and self.disk_mb > MAX_ROCK_MB:
            raise ValueError(f"disk_mb: must be at most {MAX_ROCK_MB} for store rock")
        if self.max_memory_object_mb > self.max_object_mb:
            raise ValueError("max_memory_object_mb: must not exceed max_object_mb")
        return self


# --- dns: the resolver crate's DnsConfig (gateway/crates/dns/src/config.rs) ----------------------
DNS_PORT = 53  # perigee_dns::LISTEN_PORT: the resolver listens on port 53 of every local address


def parse_upstream(value: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    """'192.0.2.53', '2001:db8::53' or 'addr@port' -> (address, port), as the gateway parses it."""
    addr_s, at, port_s = value.partition("@")
    port = DNS_PORT
    if at:
        if not re.fullmatch(r"[0-9]{1,5}", port_s) or not 1 <= int(port_s) <= 65535:
            raise ValueError(f"{value!r}: the port after '@' must be 1-65535")
        port = int(port_s)
    try:
        addr = _parse_ip(addr_s)
    except ValueError:
        raise ValueError(
            f"{value!r} is not an IP address (names cannot be resolved before the resolver exists)"
        ) from None
    # Written out rather than is_loopback & co., whose IPv4-mapped handling differs by Python
    # version; these are exactly Rust's std::net checks.
    if isinstance(addr, ipaddress.IPv6Address):
        unspecified, multicast, loopback = int(addr) == 0, addr.packed[0] == 0xFF, int(addr) == 1
    else:
        unspecified, multicast, loopback = int(addr) == 0, addr.packed[0] >> 4 == 0xE, addr.packed[0] == 127
    if unspecified or multicast:
        raise ValueError(f"{value!r} is not a unicast address")
    if loopback and port == DNS_PORT:
        raise ValueError(f"{value!r} is the gateway's own resolver: forwarding there would loop")
    return addr, port


def _upstream(value: str) -> str:
    parse_upstream(value)
    return value


Upstream = Annotated[str, Field(max_length=64), AfterValidator(_upstream)]


class Dns(Strict):
    """The gateway's caching resolver (unbound); docs/dns.md."""

    enabled: bool = False
    upstream: list[Upstream] = Field(
        default_factory=list, max_length=8, description="resolvers to forward to: 'addr' or 'addr@port'"
    )
    intercept: bool = Field(default=True, description="answer DNS from the served subnets sent to any address")
    cache_mb: int = Field(default=64, ge=4, le=16_384)
    prefetch: bool = True
    serve_stale: bool = True
    stale_ttl_s: int = Field(default=86_400, ge=60, le=604_800)
    stale_reply_ttl_s: int = Field(default=30, ge=1, le=3_600)
    stale_client_timeout_ms: int = Field(default=0, ge=0, le=10_000)
    min_ttl_s: int = Field(default=0, ge=0, le=3_600)
    max_ttl_s: int = Field(default=86_400, ge=60, le=604_800)
    max_negative_ttl_s: int = Field(default=3_600, ge=0, le=86_400)
    client_qps_limit: int = Field(default=0, ge=0, le=100_000)
    probe_timeout_ms: int = Field(default=3_000, ge=100, le=30_000)

    @model_validator(mode="after")
    def _consistent(self) -> Dns:
        seen: set[tuple[object, int]] = set()
        for i, u in enumerate(self.upstream):
            key = parse_upstream(u)
            if key in seen:
                raise ValueError(f"upstream[{i}]: {u!r} is listed twice")
            seen.add(key)
        if self.enabled and not self.upstream:
            raise ValueError("upstream: required when dns is enabled (the resolver(s) to forward to)")
        if self.min_ttl_s > self.max_ttl_s:
            raise ValueError("min_ttl_s: must not exceed max_ttl_s")
        return self


def _sysctls(value: dict[str, str]) -> dict[str, str]:
    for key, val in value.items():
        if key not in SYSCTL_ALLOW:
            raise ValueError(f"sysctl '{key}' is not allow-listed")
        if not re.fullmatch(r"[A-Za-z0-9 \t_.-]{1,64}", val):
            raise ValueError(f"sysctl '{key}': value '{val}' has characters outside [A-Za-z0-9 TAB _.-]")
    return value


class GatewayConfig(Strict):
    schema_: Literal[1] = Field(default=1, alias="schema")
    revision: str = Field(default="", max_length=64, pattern=r"^[A-Za-z0-9_.:-]*$")
    role: Literal["hub", "terminal"]
    interfaces: Interfaces
    served_subnets: list[Cidr] = Field(min_length=1, max_length=256)
    served_limits: ServedLimits = Field(default_factory=ServedLimits)
    splitter: Splitter = Field(default_factory=Splitter)
    satellite: Satellite = Field(default_factory=Satellite)
    terrestrial: Terrestrial = Field(default_factory=Terrestrial)
    hybla: Hybla = Field(default_factory=Hybla)
    classes: list[TrafficClass] = Field(default_factory=list, max_length=512)
    bypass: list[BypassRule] = Field(default_factory=list, max_length=512)
    cache: Cache = Field(default_factory=Cache)
    dns: Dns = Field(default_factory=Dns)
    shaping: Shaping = Field(default_factory=Shaping)
    peer: Peer = Field(default_factory=Peer)
    quic: QuicPolicy = Field(
        default=DEFAULT_QUIC,
        description="QUIC (UDP 443) from the served subnets: pass (end to end, not accelerated) or fallback "
        "(answered with ICMP port-unreachable, so browsers use TCP, which is accelerated)",
    )
    sysctls: Annotated[dict[str, str], AfterValidator(_sysctls)] = Field(default_factory=dict)

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    @field_validator("schema_", mode="before")
    @classmethod
    def _schema_is_an_integer(cls, value: object) -> object:
        # Literal[1] alone would also take true and 1.0, which the gateway's u32 refuses.
        if type(value) is not int:
            raise ValueError("schema must be the integer 1")
        return value

    @model_validator(mode="after")
    def _cross_field(self) -> GatewayConfig:
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
        if self.role == "hub":
            for port, name in (
                (tproxy, "splitter.tproxy_port"),
                (self.cache.port, "cache.port"),
                (self.cache.admin_port, "cache.admin_port"),
            ):
                if self.peer.port == port:
                    raise ValueError(f"peer.port: already used by {name}")
        for what, names in (("classes", [c.name for c in self.classes]), ("bypass", [r.name for r in self.bypass])):
            seen: set[str] = set()
            for name in names:
                if name in seen:
                    raise ValueError(f"{what}: duplicate name '{name}'")
                seen.add(name)
        return self

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


# The resolver behind the satellite in satlab (the server namespace): where Squid and the
# terminal's resolver forward by default.
LAB_RESOLVER = "10.71.3.53"


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
        dns=Dns(upstream=[LAB_RESOLVER]),
        sysctls={"net.ipv4.tcp_slow_start_after_idle": "0"},
    )
