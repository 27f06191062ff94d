"""The gateway's config as the API uses it: the models generated from the gateway's own schema
(`perigee_control.config`, from gateway/schema/config.schema.json), under the names the API's code uses,
and the API's first desired config.

Nothing here restates a field: types, bounds, patterns and defaults are the gateway's (its Rust types), the
checks a pattern cannot say are `perigee_control.formats`', the rules between fields `perigee_control.rules`'.
tests/test_config_contract.py proves the API accepts exactly what the gateway's validator accepts.
"""

from __future__ import annotations

from perigee_control.bypass import BUILTIN_BYPASS, BUILTIN_NAMES
from perigee_control.config import (
    Action,
    BypassProtocol,
    BypassRule,
    Cache,
    ClassSatellite,
    CongestionControl,
    Dns,
    GatewayConfig,
    Hybla,
    IfName,
    Interfaces,
    Match,
    ObjectName,
    Peer,
    QuicPolicy,
    RefreshPattern,
    Route,
    Satellite,
    ServedLimits,
    Shaping,
    Splitter,
    Terrestrial,
    TrafficClass,
)
from perigee_control.formats import Cidr, parse_cidr
from perigee_control.formats import PortRange as PortSpec
from perigee_control.formats import parse_port_range as parse_port_spec

Name = ObjectName

__all__ = [
    "BUILTIN_BYPASS",
    "BUILTIN_NAMES",
    "LAB_RESOLVER",
    "Action",
    "BypassProtocol",
    "BypassRule",
    "Cache",
    "Cidr",
    "ClassSatellite",
    "CongestionControl",
    "Dns",
    "GatewayConfig",
    "Hybla",
    "IfName",
    "Interfaces",
    "Match",
    "Name",
    "Peer",
    "PortSpec",
    "QuicPolicy",
    "RefreshPattern",
    "Route",
    "Satellite",
    "ServedLimits",
    "Shaping",
    "Splitter",
    "Terrestrial",
    "TrafficClass",
    "default_config",
    "parse_cidr",
    "parse_port_spec",
]


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
