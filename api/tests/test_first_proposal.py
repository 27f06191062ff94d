"""Nothing of satlab ships: a new appliance's first proposed config, the boot config the Debian package and the gateway
image install (debian/conf/gateway.json) and the gateway's `perigee config example` name no lab network (satlab's
10.71.0.0/16 and fd71::/16, DEVELOPERS.md). The proposal carries no routes and no resolver; its one served subnet is
TEST-NET-1, which serves nobody, and the setup wizard asks for the real ones. The boot config is that same proposal
(a packaged box and a box whose gateway started without a config start from one config)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from perigee_api.main import create_app
from perigee_api.schemas.gateway_config import (
    FACTORY_REVISION,
    PLACEHOLDER_SERVED,
    GatewayConfig,
    factory_config,
    is_factory,
)
from perigee_api.services import versions
from perigee_fakes.fake_gateway import FakeGateway
from tests.conftest import make_settings
from tests.test_config_contract import PERIGEE

LAB_MARKS = ("10.71.", "fd71:")
ROOT = Path(__file__).resolve().parents[2]
BOOT_CONFIG = ROOT / "debian" / "conf" / "gateway.json"


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


def test_the_packaged_boot_config_is_the_first_proposal() -> None:
    # What /etc/perigee/gateway.json holds on a new box (the package's conffile, the image's copy): the daemon boots it
    # and the API imports it as the first version, so it must be the API's proposal, under the factory revision (which
    # is how the API tells that the box still needs its setup: tests/test_needs_setup.py).
    shipped = json.loads(BOOT_CONFIG.read_text())
    assert shipped["revision"] == FACTORY_REVISION
    assert lab_addresses(shipped) == [], json.dumps(shipped, indent=2)
    boot = GatewayConfig.model_validate(shipped)
    assert boot.role == "hub"  # the API's own initial role (Settings.initial_role); the wizard asks for the real one
    assert boot.to_json() == factory_config(boot.role)
    assert is_factory(boot.to_json())


def test_the_packaged_boot_config_changes_no_traffic() -> None:
    # Said explicitly in the file, not left to the defaults: nothing is served, routed, cached or resolved, and the
    # peer path listens nowhere. The splitter stays on (its workers listen, so `perigee health` says ok) with
    # nothing to intercept.
    shipped = json.loads(BOOT_CONFIG.read_text())
    assert shipped["served_subnets"] == [PLACEHOLDER_SERVED]
    assert shipped["satellite"]["routes"] == []
    assert shipped["cache"]["enabled"] is False
    assert shipped["dns"] == {"enabled": False, "upstream": []}
    assert shipped["peer"]["enabled"] is False
    assert shipped["splitter"]["enabled"] is True
    assert "shaping" not in shipped and "sites" not in shipped and "classes" not in shipped
