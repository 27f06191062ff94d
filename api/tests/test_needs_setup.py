"""`needs_setup` in the running view: a new box, whether its gateway runs no config or the factory config the
package, the image and the VM ship, still needs its setup (the dashboard sends operators to the wizard and tells
viewers so). Only the factory content under the factory revision counts; any config an operator applied does not."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from perigee_api.schemas.gateway_config import FACTORY_REVISION, factory_config, is_factory
from perigee_fakes.fake_gateway import FakeGateway
from tests.test_first_proposal import BOOT_CONFIG
from tests.test_running_config import started


def shipped() -> dict[str, Any]:
    """The boot config as packaged (debian/conf/gateway.json)."""
    return dict(json.loads(BOOT_CONFIG.read_text()))


def running_view(tmp_path: Path, gw: FakeGateway) -> dict[str, Any]:
    _app, c = started(tmp_path, gw.socket_path)
    return dict(c.get("/api/v1/config/running").json())


def test_a_gateway_running_no_config_needs_setup(fake_gw: FakeGateway, tmp_path: Path) -> None:
    view = running_view(tmp_path, fake_gw)
    assert view["reachable"] and view["revision"] is None
    assert view["needs_setup"] is True


def test_the_packaged_factory_config_needs_setup(sock_dir: Path, tmp_path: Path) -> None:
    with FakeGateway(sock_dir / "control.sock", running=shipped()) as gw:
        view = running_view(tmp_path, gw)
    assert view["revision"] == FACTORY_REVISION and view["in_sync"], view
    assert view["needs_setup"] is True


def test_the_factory_config_of_a_terminal_needs_setup_too(sock_dir: Path, tmp_path: Path) -> None:
    with FakeGateway(sock_dir / "control.sock", running=factory_config("terminal")) as gw:
        assert running_view(tmp_path, gw)["needs_setup"] is True


@pytest.mark.parametrize(
    "change",
    [
        lambda c: c.update(served_subnets=["10.20.0.0/16"]),
        lambda c: c["satellite"]["routes"].append({"dst": "10.30.0.0/16", "via": "192.0.2.1"}),
        lambda c: c["interfaces"].update(lan=["eth1"], satellite="eth0"),
        lambda c: c.update(cache={"enabled": True}, dns={"enabled": True, "upstream": ["192.0.2.53"]}),
    ],
    ids=["served subnets", "a route", "interfaces", "cache and resolver"],
)
def test_an_operator_config_that_kept_the_factory_revision_is_not_factory(
    change: Any, sock_dir: Path, tmp_path: Path
) -> None:
    own = copy.deepcopy(shipped())
    change(own)
    assert own["revision"] == FACTORY_REVISION
    with FakeGateway(sock_dir / "control.sock", running=own) as gw:
        view = running_view(tmp_path, gw)
    assert view["revision"] == FACTORY_REVISION and view["reachable"], view
    assert view["needs_setup"] is False


def test_the_wizard_applied_config_clears_it(sock_dir: Path, tmp_path: Path) -> None:
    with FakeGateway(sock_dir / "control.sock", running=shipped()) as gw:
        _app, c = started(tmp_path, gw.socket_path)
        assert c.get("/api/v1/config/running").json()["needs_setup"] is True
        # What the wizard's one apply does: the whole config, edited, saved as a version, then that version applied.
        cfg = c.get("/api/v1/config").json()["config"]
        cfg.update(role="terminal", served_subnets=["10.71.1.0/24"])
        cfg["satellite"]["routes"] = [{"dst": "10.71.3.0/24", "via": "10.71.2.2"}]
        r = c.put("/api/v1/config", json={"config": cfg, "comment": "first setup (wizard)"})
        assert r.status_code == 200, r.text
        applied = c.post(f"/api/v1/versions/{r.json()['version_id']}/apply").json()
        assert applied["ok"], applied
        view = c.get("/api/v1/config/running").json()
    assert view["in_sync"] and view["revision"] != FACTORY_REVISION, view
    assert view["needs_setup"] is False


def test_an_unreachable_gateway_is_not_said_to_need_setup(tmp_path: Path) -> None:
    _app, c = started(tmp_path, tmp_path / "nowhere.sock")
    view = c.get("/api/v1/config/running").json()
    assert not view["reachable"] and view["needs_setup"] is False


def test_factory_means_the_revision_and_the_content() -> None:
    assert is_factory(factory_config("hub")) and is_factory(factory_config("terminal"))
    assert not is_factory(factory_config("hub") | {"revision": "v2"}), "the factory content applied as a version"
    assert not is_factory(factory_config("hub") | {"served_subnets": ["10.20.0.0/16"]})
