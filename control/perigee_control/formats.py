"""The value types whose rules a JSON Schema pattern cannot say, checked as the gateway's parsers check them
(gateway/crates/types, the Squid and resolver crates). The generated models use these in place of the schema's
definitions of the same name; tests/test_config_contract.py holds them to the gateway's own parser.

Each check returns the value in the form the gateway writes back (a CIDR with its host bits cleared, a port
without leading zeros, a resolver without "@53"), so a config the API stores is the one the gateway reports running
(tests/test_config_contract.py compares the two for every accepted case)."""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from typing import Annotated

from pydantic import AfterValidator, Field

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
V4_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
DNS_PORT = 53  # the resolver listens on port 53 of every local address


def parse_ip(value: str) -> IpAddress:
    # Python also takes IPv6 scope ids ("fe80::1%eth0"); the gateway (and the kernel routes) do not.
    if "%" in value:
        raise ValueError(f"'{value}' is not an IPv4 or IPv6 address (no scope ids)")
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        raise ValueError(f"'{value}' is not an IPv4 or IPv6 address") from None


def ip_text(addr: IpAddress) -> str:
    """The address as the gateway writes it (Rust's std::net): RFC 5952, except that an IPv4-mapped IPv6
    address keeps its dotted quad ("::ffff:10.0.0.1", where Python writes "::ffff:a00:1")."""
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return f"::ffff:{addr.ipv4_mapped}"
    return str(addr)


def parse_cidr(value: str) -> IpNetwork:
    """'10.0.0.0/8', 'fd00::/8' or a bare address; the prefix length is 1-3 ASCII digits (no netmasks).

    IPv4-mapped IPv6 prefixes (inside ::ffff:0:0/96) are refused: no IPv4 packet carries one, so a rule on
    them would match nothing (and in Squid's ACL, every IPv4 client)."""
    addr_s, slash, prefix_s = value.partition("/")
    addr = parse_ip(addr_s)
    if not slash:
        net = ipaddress.ip_network(addr)
    elif not re.fullmatch(r"[0-9]{1,3}", prefix_s) or int(prefix_s) > addr.max_prefixlen:
        raise ValueError(f"'{value}': bad prefix length")
    else:
        net = ipaddress.ip_network((addr, int(prefix_s)), strict=False)
    if isinstance(net, ipaddress.IPv6Network) and net.subnet_of(V4_MAPPED):
        raise ValueError(f"'{value}' is IPv4-mapped IPv6 (::ffff:0:0/96): write the IPv4 address or subnet itself")
    return net


def parse_port_range(value: str) -> tuple[int, int]:
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


def parse_upstream(value: str) -> tuple[IpAddress, int]:
    """'192.0.2.53', '2001:db8::53' or 'addr@port' -> (address, port), as the gateway parses it."""
    addr_s, at, port_s = value.partition("@")
    port = DNS_PORT
    if at:
        if not re.fullmatch(r"[0-9]{1,5}", port_s) or not 1 <= int(port_s) <= 65535:
            raise ValueError(f"{value!r}: the port after '@' must be 1-65535")
        port = int(port_s)
    try:
        addr = parse_ip(addr_s)
    except ValueError:
        raise ValueError(
            f"{value!r} is not an IP address (names cannot be resolved before the resolver exists)"
        ) from None
    unspecified, multicast, loopback = std_net_kind(addr)
    if unspecified or multicast:
        raise ValueError(f"{value!r} is not a unicast address")
    if loopback and port == DNS_PORT:
        raise ValueError(f"{value!r} is the gateway's own resolver: forwarding there would loop")
    return addr, port


def std_net_kind(addr: IpAddress) -> tuple[bool, bool, bool]:
    """(unspecified, multicast, loopback) as Rust's std::net decides them: written out rather than
    is_loopback & co., whose IPv4-mapped handling differs by Python version."""
    if isinstance(addr, ipaddress.IPv6Address):
        return int(addr) == 0, addr.packed[0] == 0xFF, int(addr) == 1
    return int(addr) == 0, addr.packed[0] >> 4 == 0xE, addr.packed[0] == 127


def regex_balance_problem(regex: str) -> str | None:
    """The gateway's structural check of a refresh_pattern: brackets and parentheses balance, no trailing
    backslash."""
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


def _cidr(value: str) -> str:
    return str(parse_cidr(value))


def _port_range(value: str) -> str:
    lo, hi = parse_port_range(value)
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _upstream(value: str) -> str:
    addr, port = parse_upstream(value)
    return ip_text(addr) if port == DNS_PORT else f"{ip_text(addr)}@{port}"


def _ip(value: str) -> str:
    return ip_text(parse_ip(value))


def _refresh_regex(value: str) -> str:
    if not 1 <= len(value.encode()) <= 512:
        raise ValueError("must be 1-512 bytes")
    if any(c.isspace() or unicodedata.category(c) == "Cc" or c == "#" for c in value):
        raise ValueError("must not contain whitespace, control characters or '#' (squid.conf has no quoting)")
    if value.startswith("-"):
        raise ValueError("must not start with '-' (read as an option by Squid)")
    problem = regex_balance_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _cache_domain(value: str) -> str:
    """An IPv4 literal, or a hostname (optional leading dot, labels of [A-Za-z0-9-])."""
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


def zone_key(value: str) -> str:
    """A zone as the gateway compares it: lowercased, without the trailing dot."""
    return (value[:-1] if value.endswith(".") else value).lower()


def _zone(value: str) -> str:
    """A DNS zone as perigee_dns::zone::validate_name takes it: labels of [A-Za-z0-9_-] (1-63 each), 1-253
    characters, an optional trailing dot; never the root."""
    name = value[:-1] if value.endswith(".") else value
    if not 1 <= len(name) <= 253 or not all(re.fullmatch(r"[A-Za-z0-9_-]{1,63}", label) for label in name.split(".")):
        raise ValueError(f'{value!r} is not a zone name (write it as "corp.example.com"; not the root)')
    return value


# The schema's definitions of the same names, with the checks of the gateway's parsers.
Cidr = Annotated[str, Field(max_length=64), AfterValidator(_cidr)]
IpAddr = Annotated[str, Field(max_length=64), AfterValidator(_ip)]
PortRange = Annotated[str, Field(max_length=11), AfterValidator(_port_range)]
Upstream = Annotated[str, Field(max_length=64), AfterValidator(_upstream)]
RefreshRegex = Annotated[str, AfterValidator(_refresh_regex)]
CacheDomain = Annotated[str, Field(max_length=254), AfterValidator(_cache_domain)]
Zone = Annotated[str, Field(max_length=254), AfterValidator(_zone)]
