"""Nothing of satlab ships: a new appliance's first proposed config and the gateway's `perigee config example` name
no lab network (satlab's 10.71.0.0/16 and fd71::/16, DEVELOPERS.md). The proposal carries no routes and no resolver;
its one served subnet is TEST-NET-1, which serves nobody, and the setup wizard asks for the real ones."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from perigee_api.main import create_app
from perigee_api.schemas.gateway_config import PLACEHOLDER_SERVED, GatewayConfig
from perigee_api.services import versions
from perigee_fakes.fake_gateway import FakeGateway
from tests.conftest import make_settings
from tests.test_config_contract import PERIGEE

LAB_MARKS = ("10.71.", "fd71:")


def lab_addresses(doc: object) -> list[str]:
    text = json.dumps(doc)
    return [mark for mark in LAB_MARKS if mark in text]


@pytest.mark.parametrize("role", ["hub", "terminal"])
def test_a_new_box_proposes_no_lab_network(role: str, tmp_path: Path, fake_gw: FakeGateway) -> None:
    assert fake_gw.config is None  # the gateway runs nothing: the API proposes its own first config
    app = create_app(make_settings(tmp_path / "data", fake_gw.socket_path, initial_role=role))
    try:
        with app.state.ctx.db.session() as s:
            first = versions.latest(s)
            proposed = GatewayConfig.model_validate(first.config)
    finally:
        app.state.ctx.db.dispose()
    assert first.comment.startswith("initial default config") and first.author == "system"
    assert lab_addresses(first.config) == [], json.dumps(first.config, indent=2)
    assert proposed.role == role
    assert proposed.satellite.routes == []
    assert proposed.dns.upstream == [] and proposed.dns.enabled is False
    assert [str(n) for n in proposed.served_subnets] == [PLACEHOLDER_SERVED]


def test_the_gateway_example_config_names_no_lab_network() -> None:
    if not PERIGEE.is_file():
        pytest.fail(f"{PERIGEE} is missing: run `make -C gateway build` first")
    out = subprocess.run([str(PERIGEE), "config", "example"], capture_output=True, text=True, timeout=30, check=True)
    example = json.loads(out.stdout)
    assert example["served_subnets"], "the example shows a served subnet"
    assert lab_addresses(example) == [], out.stdout
