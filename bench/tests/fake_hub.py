"""The hub's config as satlab starts it, as far as the harness tests read it: what they run the gateway test
double (perigee_fakes.fake_gateway.FakeGateway) with; the double fills in the schema's defaults."""

from typing import Any

HUB_CONFIG: dict[str, Any] = {
    "schema": 1,
    "revision": "satlab-hub",
    "role": "hub",
    "interfaces": {"lan": ["lan0"], "satellite": "sat0"},
    "served_subnets": ["10.71.1.0/24"],
    "quic": "pass",
}
