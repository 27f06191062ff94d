"""satlab's gateway configs as the API's models (the addressing in DEVELOPERS.md): the config the fake gateway
runs in the browser suite, and what the API's tests store and send. The product never proposes these
(perigee_api.schemas.gateway_config.default_config names no network); satlab configures its own gateways
(satlab.gateway.default_config)."""

from __future__ import annotations

from perigee_api.schemas.gateway_config import BUILTIN_BYPASS, Dns, GatewayConfig, Interfaces, Route, Satellite

# The resolver behind the satellite in satlab (the server namespace).
LAB_RESOLVER = "10.71.3.53"
CLIENT_SUBNETS = ["10.71.1.0/24", "fd71:1::/64"]


def lab_config(role: str = "hub") -> GatewayConfig:
    """satlab's hub or terminal: its client LAN served, the routes across the satellite, the lab's resolver."""
    if role == "terminal":
        routes = [Route(dst="10.71.3.0/24", via="10.71.2.2"), Route(dst="fd71:3::/64", via="fd71:2::2")]
    else:
        routes = [Route(dst="10.71.1.0/24", via="10.71.2.1"), Route(dst="fd71:1::/64", via="fd71:2::1")]
    return GatewayConfig(
        role="terminal" if role == "terminal" else "hub",
        interfaces=Interfaces(lan=["lan0"], satellite="sat0"),
        served_subnets=list(CLIENT_SUBNETS),
        satellite=Satellite(routes=routes),
        bypass=list(BUILTIN_BYPASS),
        dns=Dns(upstream=[LAB_RESOLVER]),
        sysctls={"net.ipv4.tcp_slow_start_after_idle": "0"},
    )
