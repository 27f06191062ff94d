"""What the gateway owns (its bounds, its built-in bypass entries, the protocols that take ports) reaches the API's
request models, its rules, satlab and the live stream from the gateway's schema: each test here fails when a copy
drifts from it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from perigee_api.schemas import api as api_models
from perigee_api.schemas import gateway_config
from perigee_control import bypass, config

ROOT = Path(__file__).resolve().parents[2]
GATEWAY_SCHEMA = json.loads((ROOT / "gateway" / "schema" / "config.schema.json").read_text())
OPENAPI = json.loads((ROOT / "api" / "openapi.json").read_text())


def _gateway_field(model: str, field: str) -> dict[str, Any]:
    return GATEWAY_SCHEMA["$defs"][model]["properties"][field]


def _api_field(model: str, field: str) -> dict[str, Any]:
    prop = OPENAPI["components"]["schemas"][model]["properties"][field]
    # Optional fields are anyOf [the type, null].
    return next((s for s in prop.get("anyOf", [prop]) if s.get("type") != "null"), prop)


@pytest.mark.parametrize(
    ("api", "gateway", "field", "keywords"),
    [
        ("ClassIn", "TrafficClass", "priority", ("minimum", "maximum")),
        ("ClassPatch", "TrafficClass", "priority", ("minimum", "maximum")),
        ("BypassIn", "BypassRule", "cidrs", ("maxItems",)),
        ("BypassIn", "BypassRule", "ports", ("maxItems",)),
    ],
)
def test_request_models_take_the_gateways_bounds(api: str, gateway: str, field: str, keywords: tuple[str, ...]) -> None:
    for kw in keywords:
        assert _api_field(api, field)[kw] == _gateway_field(gateway, field)[kw], f"{api}.{field} {kw}"


def test_the_bypass_form_offers_every_protocol_the_gateway_accepts() -> None:
    api_protocols = OPENAPI["components"]["schemas"]["BypassProtocol"]["enum"]
    assert api_protocols == GATEWAY_SCHEMA["$defs"]["BypassProtocol"]["enum"]


def test_the_builtin_bypass_entries_are_the_gateways() -> None:
    emitted = GATEWAY_SCHEMA["properties"]["bypass"]["x-builtin"]
    assert bypass.builtin_bypass_json() == emitted
    # The API's first config and its "restore built-ins" use that one list.
    assert gateway_config.BUILTIN_BYPASS is bypass.BUILTIN_BYPASS
    first = [r.model_dump(mode="json") for r in gateway_config.default_config().bypass]
    assert first == emitted
    assert {r["name"] for r in emitted} == bypass.BUILTIN_NAMES


def test_ports_need_a_protocol_the_gateway_names() -> None:
    with_ports = _gateway_field("BypassRule", "ports")["x-protocols"]
    assert list(bypass.PORT_PROTOCOLS) == with_ports
    for protocol in GATEWAY_SCHEMA["$defs"]["BypassProtocol"]["enum"]:
        entry = {"name": "x", "protocol": protocol, "cidrs": ["192.0.2.0/24"], "ports": ["443"]}
        if protocol in with_ports:
            config.BypassRule.model_validate(entry)
        else:
            with pytest.raises(ValidationError, match="ports need protocol"):
                config.BypassRule.model_validate(entry)


def test_the_stream_sends_the_event_its_model_names(admin: TestClient) -> None:
    model = OPENAPI["components"]["schemas"]["FlowsEvent"]
    assert model["x-sse-event"] == api_models.FLOWS_EVENT
    r = admin.get("/api/v1/flows/stream", params={"max_events": 1})
    assert r.status_code == 200
    events = [block for block in r.text.split("\n\n") if block.startswith("event:")]
    assert events, r.text
    for block in events:
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        assert lines["event"] == model["x-sse-event"]
        # Exactly the model's fields, each valid for it.
        data = json.loads(lines["data"])
        assert set(data) == set(model["properties"])
        api_models.FlowsEvent.model_validate(data)


def test_the_bod_derivation_clamps_to_the_gateways_windows() -> None:
    from perigee_api import tuning

    satellite = GATEWAY_SCHEMA["$defs"]["Satellite"]["properties"]
    assert satellite["initcwnd"]["default"] == tuning.INITWND_MIN
    assert satellite["initrwnd"]["maximum"] == tuning.INITRWND_MAX
    assert GATEWAY_SCHEMA["$defs"]["Hybla"]["properties"]["cwnd_max"]["maximum"] == tuning.CWND_MAX_MAX
    # A fast, long link asks for more than the config holds: the derivation stops at the gateway's bound.
    inputs = tuning.BodInputs(
        forward_rate_bps=10_000_000_000,
        return_cra_bps=10_000_000_000,
        return_rbdc_max_bps=0,
        superframe_ms=26.5,
        allocation_delay_ms=0.0,
        base_rtt_ms=2_000.0,
        terminal_buffer_bytes=1 << 30,
    )
    values = tuning.derive(inputs).values
    assert values["initrwnd"].value == satellite["initrwnd"]["maximum"]


PERIGEE = ROOT / "gateway" / "target" / "release" / "perigee"


@pytest.mark.parametrize(
    ("rate_bps", "rtt_ms", "mss"),
    [(50_000_000, 600, 1448), (2_000_000, 560, 1448), (1_000, 1, 536), (10_000_000_000, 10_000, 1448), (7, 3, 0)],
)
def test_the_hybla_ceiling_is_the_gateways(rate_bps: int, rtt_ms: int, mss: int) -> None:
    from perigee_control import hybla

    if not PERIGEE.is_file():
        pytest.fail(f"{PERIGEE} is missing: run `make -C gateway build` first")
    argv = [str(PERIGEE), "hybla", "ceiling", "--rate-bps", str(rate_bps), "--base-rtt-ms", str(rtt_ms)]
    argv += ["--mss", str(mss)]
    gateway = int(subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout)
    assert hybla.cwnd_ceiling_for_link(rate_bps, rtt_ms * 1000, mss) == gateway


def test_the_shipped_boot_config_carries_the_gateways_builtin_bypass_entries() -> None:
    shipped = "debian/conf/gateway.json"  # the package's and the image's boot config (one file)
    # A shipped first config is plain JSON (it cannot import the list): it must carry the gateway's list as it is.
    entries = json.loads((ROOT / shipped).read_text())["bypass"]
    builtin = [config.BypassRule.model_validate(e).model_dump(mode="json") for e in entries if e.get("builtin")]
    assert builtin == GATEWAY_SCHEMA["properties"]["bypass"]["x-builtin"]
