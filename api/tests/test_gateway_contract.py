"""Contract tests of the control protocol (docs/control-protocol.md) through perigee_control.client.

They run against the fake gateway, and also against the real daemon when
PERIGEE_TEST_REAL_GATEWAY=/path/to/control.sock is set (applying a config to the real daemon changes
system state, so that part runs only with PERIGEE_TEST_REAL_GATEWAY_APPLY=1 too).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from perigee_api.schemas.gateway_config import BUILTIN_NAMES, default_config
from perigee_control import reports
from perigee_control.client import GatewayClient, GatewayError
from perigee_fakes.fake_gateway import FakeGateway
from tests.conftest import real_gateway_socket

TARGETS = ["fake"] + (["real"] if real_gateway_socket() else [])


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest, sock_dir: Path) -> Iterator[tuple[str, GatewayClient]]:
    if request.param == "real":
        yield "real", GatewayClient(str(real_gateway_socket()))
        return
    with FakeGateway(sock_dir / "c.sock") as gw:
        yield "fake", GatewayClient(gw.socket_path)


def test_health_shape(target: tuple[str, GatewayClient]) -> None:
    h = target[1].json.health()
    assert h["status"] in ("ok", "degraded")
    for key in ("version", "uptime_s", "role", "config_revision", "fail_open", "hybla", "problems"):
        assert key in h, key
    for key in ("implementation", "loaded", "rtt0_ms", "base_rtt_ms", "available", "problem"):
        assert key in h["hybla"], key


def test_validate_accepts_default_config(target: tuple[str, GatewayClient]) -> None:
    res = target[1].json.validate_config(default_config().to_json())
    assert res["ok"] is True
    assert {"nft", "routes", "sysctls", "squid_conf"} <= set(res["rendered"])
    assert BUILTIN_NAMES  # the default carries the IPsec bypass rules


@pytest.mark.parametrize(
    ("mutate", "why"),
    [
        (lambda c: c.update(surprise=1), "unknown top-level field"),
        (lambda c: c["splitter"].update(tproxy_port=70000), "port out of range"),
        (lambda c: c.update(served_subnets=["10.0.0.0/40"]), "bad CIDR"),
        (
            lambda c: c["classes"].append({"name": "x", "priority": 1, "action": "zap", "match": {}}),
            "bad action",
        ),
        (lambda c: c["satellite"].update(congestion_control="vegas"), "unknown congestion control"),
    ],
)
def test_validate_rejects_with_error_shape(target: tuple[str, GatewayClient], mutate, why) -> None:  # type: ignore[no-untyped-def]
    cfg = default_config().to_json()
    mutate(cfg)
    with pytest.raises(GatewayError) as info:
        target[1].validate_config(cfg)
    err = info.value
    assert 400 <= err.status < 500, why
    assert err.code and err.message, why


def test_flows_counters_cache(target: tuple[str, GatewayClient]) -> None:
    gw = target[1]
    snap = gw.json.flows("live")
    assert isinstance(snap["flows"], list) and isinstance(snap["now"], float | int)
    assert isinstance(gw.json.collect_flows()["flows"], list)
    c = gw.json.counters()
    for key in ("flows_live", "flows_total", "bytes_up", "bytes_down", "by_action"):
        assert key in c, key
    assert isinstance(gw.json.hybla()["loaded"], bool)
    with pytest.raises(GatewayError) as info:
        gw.call("GET", "/v1/flows", query={"state": "bogus"})
    assert 400 <= info.value.status < 500


def extras(value: object, path: str = "$") -> list[str]:
    """Fields a report carries that its schema does not name, anywhere inside it."""
    if isinstance(value, BaseModel):
        out = [f"{path}.{k}" for k in value.model_extra or {}]
        for name in type(value).model_fields:
            out += extras(getattr(value, name), f"{path}.{name}")
        return out
    if isinstance(value, list):
        return [e for i, v in enumerate(value) for e in extras(v, f"{path}[{i}]")]
    return []


def test_every_answer_is_what_the_schema_says(target: tuple[str, GatewayClient]) -> None:
    """The answers parse as the report types generated from the gateway's schema, with no field the
    schema does not name: the schema is what the daemon sends, not an approximation of it."""
    gw = target[1]
    answers: list[tuple[type[BaseModel], object]] = [
        (reports.Health, gw.json.health()),
        (reports.Counters, gw.json.counters()),
        (reports.FlowList, gw.json.flows("all")),
        (reports.FlowList, gw.json.collect_flows()),
        (reports.HyblaStatus, gw.json.hybla()),
        (reports.CacheStats, gw.json.cache_stats()),
        (reports.DnsReport, gw.json.dns_stats()),
        (reports.InterfaceList, gw.json.interfaces()),
        (reports.Validated, gw.json.validate_config(default_config().to_json())),
    ]
    for model, body in answers:
        parsed = model.model_validate(body)
        assert not extras(parsed), f"{model.__name__}: fields outside the schema: {extras(parsed)}"
    with pytest.raises(GatewayError) as info:
        gw.call("GET", "/v1/nope")
    assert info.value.code == "not_found"


def test_apply_is_atomic(target: tuple[str, GatewayClient], sock_dir: Path) -> None:
    name, gw = target
    if name == "real" and not os.environ.get("PERIGEE_TEST_REAL_GATEWAY_APPLY"):
        pytest.skip("applying to the real daemon needs PERIGEE_TEST_REAL_GATEWAY_APPLY=1")
    cfg = default_config().to_json()
    cfg["revision"] = "contract-1"
    res = gw.apply_config(cfg)
    assert res.ok is True and res.revision == "contract-1"
    # Kept for the next start (the real daemon runs with --config, in satlab's writable run directory).
    assert res.persisted is True and res.persist_error is None, res
    assert gw.get_config()["revision"] == "contract-1"
    bad = dict(cfg, revision="contract-2", surprise=True)
    with pytest.raises(GatewayError):
        gw.apply_config(bad)
    assert gw.get_config()["revision"] == "contract-1"


def test_unreachable_socket(sock_dir: Path) -> None:
    gw = GatewayClient(sock_dir / "missing.sock")
    with pytest.raises(GatewayError) as info:
        gw.health()
    assert info.value.code == "gateway_unreachable"
