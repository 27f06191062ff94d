"""The gateway's config as the API uses it: the models generated from the gateway's own schema
(`perigee_control.config`, from gateway/schema/config.schema.json), under the names the API's code uses,
and the API's first desired config (a proposal with nothing of any one network in it: the setup wizard asks for
this box's networks).

Nothing here restates a field: types, bounds, patterns and defaults are the gateway's (its Rust types), the
checks a pattern cannot say are `perigee_control.formats`', the rules between fields `perigee_control.rules`'.
tests/test_config_contract.py proves the API accepts exactly what the gateway's validator accepts.
"""

from __future__ import annotations

from typing import Any

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
    "FACTORY_REVISION",
    "PLACEHOLDER_SERVED",
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
    "factory_config",
    "is_factory",
    "parse_cidr",
    "parse_port_spec",
]


# The first proposal's served subnet: TEST-NET-1 (RFC 5737), which no client has. The schema needs at least one
# served subnet and only the operator knows the real ones, so the proposal names one that serves nobody: applied
# unchanged, it intercepts nothing. The setup wizard clears it and asks for this box's subnets.
PLACEHOLDER_SERVED = "192.0.2.0/24"


def default_config(role: str = "hub") -> GatewayConfig:
    """The first desired config the API proposes on a new box (never applied by itself): the built-in bypass
    rules, the gateway's defaults, and nothing of any one network: no routes, no DNS upstream, a served subnet
    that serves nobody. The lab configures its gateways itself (satlab.gateway, perigee_fakes.lab_config)."""
    return GatewayConfig(
        role="terminal" if role == "terminal" else "hub",
        interfaces=Interfaces(lan=["lan0"], satellite="sat0"),
        served_subnets=[PLACEHOLDER_SERVED],
        bypass=list(BUILTIN_BYPASS),
        sysctls={"net.ipv4.tcp_slow_start_after_idle": "0"},
    )


# The revision of the factory config: the first proposal as the Debian package and the gateway image ship it
# (debian/conf/gateway.json, held to it by tests/test_first_proposal.py). A box that runs it, unchanged, serves
# nobody and still needs its setup.
FACTORY_REVISION = "factory-default"


def factory_config(role: str = "hub") -> dict[str, Any]:
    """The factory config for `role`, as the gateway takes it: the first proposal under FACTORY_REVISION."""
    return default_config(role).to_json() | {"revision": FACTORY_REVISION}


def is_factory(config: dict[str, Any]) -> bool:
    """`config` (canonical, as the gateway reports it) is the factory config: its revision AND its content. An
    operator's config that kept the revision name but changed anything else is theirs, not the factory's."""
    if config.get("revision") != FACTORY_REVISION:
        return False
    return config == factory_config(str(config.get("role", "")))
