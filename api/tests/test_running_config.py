"""The API always knows what the gateway runs: a config that reached the gateway some other way (its own config
file at the first start, the CLI, a restored machine) is imported as a version and becomes the active one, and the
drift between what runs and the desired version is reported with its diff."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from perigee_api.main import create_app
from perigee_api.schemas.gateway_config import GatewayConfig
from perigee_fakes.fake_gateway import FakeGateway
from perigee_fakes.lab_config import lab_config
from tests.conftest import STRONG, login, make_settings, new_client, one_time_password, real_gateway_socket


def own_config(revision: str = "site-7") -> dict[str, Any]:
    """A config the gateway was given without the API: a terminal with the cache off and its own classes."""
    cfg = lab_config("terminal").to_json()
    cfg["revision"] = revision
    cfg["classes"] = [{"name": "web", "priority": 100, "action": "accelerate", "match": {"dports": ["80", "443"]}}]
    cfg["splitter"]["max_flows"] = 2500
    return cfg


def started(tmp_path: Path, socket: Path) -> tuple[FastAPI, TestClient]:
    settings = make_settings(tmp_path / "data", socket)
    app = create_app(settings)
    c = new_client(app)
    assert login(c, "admin", one_time_password(settings)).status_code == 200
    r = c.post(
        "/api/v1/auth/change-password", json={"current_password": one_time_password(settings), "new_password": STRONG}
    )
    assert r.status_code == 200, r.text
    return app, c


@pytest.fixture
def site(sock_dir: Path) -> Iterator[FakeGateway]:
    with FakeGateway(sock_dir / "control.sock", running=own_config()) as gw:
        yield gw


def test_first_start_imports_what_the_gateway_runs(site: FakeGateway, tmp_path: Path) -> None:
    _app, c = started(tmp_path, site.socket_path)
    listed = c.get("/api/v1/versions").json()
    assert listed["total"] == 1, "no default config beside what runs"
    first = listed["versions"][0]
    assert first["active"] and first["apply_status"] == "applied" and first["author"] == "gateway"
    assert "imported from the gateway" in first["comment"] and "site-7" in first["comment"]
    assert c.get(f"/api/v1/versions/{first['id']}").json()["config"] == site.config
    running = c.get("/api/v1/config/running").json()
    assert running["in_sync"] and running["changes"] == [] and running["revision"] == "site-7"
    audit = c.get("/api/v1/audit", params={"action": "import running config"}).json()["entries"]
    assert audit and audit[0]["actor"] == "gateway"


def test_a_config_applied_with_the_cli_becomes_the_active_version(site: FakeGateway, tmp_path: Path) -> None:
    app, c = started(tmp_path, site.socket_path)
    cli = own_config("cli-2")
    cli["cache"] = {"enabled": True}
    site.run_config(cli)
    app.state.ctx.collector.sync_running()
    listed = c.get("/api/v1/versions").json()
    assert listed["total"] == 2 and listed["active_version_id"] == listed["latest_version_id"]
    assert c.get("/api/v1/config").json()["config"]["cache"]["enabled"] is True
    # Seen again: nothing new is imported.
    app.state.ctx.collector.sync_running()
    assert c.get("/api/v1/versions").json()["total"] == 2


def test_drift_is_reported_with_its_diff_until_applied(site: FakeGateway, tmp_path: Path) -> None:
    _app, c = started(tmp_path, site.socket_path)
    desired = c.get("/api/v1/config").json()["config"]
    desired["splitter"]["max_flows"] = 4000
    r = c.put("/api/v1/config", json={"config": desired, "comment": "more flows"})
    assert r.status_code == 200, r.text
    new_id = r.json()["version_id"]
    running = c.get("/api/v1/config/running").json()
    assert not running["in_sync"] and running["version_id"] == 1 and running["desired_version_id"] == new_id
    assert running["changes"] == [{"path": "$.splitter.max_flows", "op": "changed", "old": 2500, "new": 4000}]
    assert c.post(f"/api/v1/versions/{new_id}/apply").json()["ok"]
    running = c.get("/api/v1/config/running").json()
    assert running["in_sync"] and running["changes"] == [] and running["version_id"] == new_id
    assert c.get("/api/v1/versions").json()["total"] == 2, "an applied version is recognised, not imported"


def test_a_restored_history_whose_revision_names_another_config_imports_the_running_one(
    sock_dir: Path, tmp_path: Path
) -> None:
    # The API's v1 is the proposed default; the gateway runs something else that is also called "v1".
    with FakeGateway(sock_dir / "control.sock") as gw:
        _app, c = started(tmp_path, gw.socket_path)
        assert c.get("/api/v1/versions").json()["versions"][0]["comment"].startswith("initial default config")
        gw.run_config(own_config("v1"))
        running = c.get("/api/v1/config/running").json()
        assert running["reachable"] and running["revision"] == "v1"
        # Checked again on request once stale; here the collector is asked directly.
        _app.state.ctx.collector.sync_running()
        listed = c.get("/api/v1/versions").json()
        assert listed["total"] == 2 and listed["active_version_id"] == 2


def test_a_gateway_running_nothing_is_not_shown_as_running_the_default(fake_gw: FakeGateway, tmp_path: Path) -> None:
    _app, c = started(tmp_path, fake_gw.socket_path)
    listed = c.get("/api/v1/versions").json()
    assert listed["total"] == 1 and listed["active_version_id"] is None
    assert listed["versions"][0]["apply_status"] == "none"
    running = c.get("/api/v1/config/running").json()
    assert running["reachable"] and running["revision"] is None and running["config"] is None
    assert not running["in_sync"] and running["changes"], "everything would change: nothing runs"


def test_an_unreachable_gateway_is_said_so(tmp_path: Path) -> None:
    _app, c = started(tmp_path, tmp_path / "nowhere.sock")
    running = c.get("/api/v1/config/running").json()
    assert not running["reachable"] and running["error"] and not running["in_sync"]


def test_a_running_config_the_api_cannot_read_is_reported_not_imported(site: FakeGateway, tmp_path: Path) -> None:
    app, c = started(tmp_path, site.socket_path)
    assert site.config is not None
    site.config = {**site.config, "revision": "future-1", "warp_drive": {"enabled": True}}
    site.revision = "future-1"
    state = app.state.ctx.collector.sync_running()
    assert state.version_id is None and state.error and "warp_drive" in state.error
    assert c.get("/api/v1/versions").json()["total"] == 1


@pytest.mark.skipif(real_gateway_socket() is None, reason="needs PERIGEE_TEST_REAL_GATEWAY (make -C api test)")
def test_first_start_against_the_real_gateway(tmp_path: Path) -> None:
    sock = str(real_gateway_socket())
    perigee = Path(__file__).resolve().parents[2] / "gateway" / "target" / "release" / "perigee"
    out = subprocess.run([str(perigee), "config", "get", "--control-socket", sock], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    runs = GatewayConfig.model_validate(json.loads(out.stdout)).to_json()
    _app, c = started(tmp_path, Path(sock))
    listed = c.get("/api/v1/versions").json()
    first = listed["versions"][-1]
    assert listed["total"] == 1 and first["active"] and first["author"] == "gateway"
    assert c.get(f"/api/v1/versions/{first['id']}").json()["config"] == runs
    assert c.get("/api/v1/config/running").json()["in_sync"]
