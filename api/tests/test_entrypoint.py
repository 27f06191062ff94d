"""`python -m perigee_api` end to end: Unix socket, first-start password on the console, collector thread."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from perigee_api.core.config import Settings
from perigee_fakes.fake_gateway import FakeGateway, make_flow
from satlab.testing import HUNG_S

API_DIR = Path(__file__).resolve().parents[1]


def test_settings_from_file_and_env(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "perigee.toml"
    f.write_text('data_dir = "/srv/perigee"\nsecure_cookies = false\nlogin_free_failures = 3\n')
    monkeypatch.setenv("PERIGEE_SETTINGS_FILE", str(f))
    monkeypatch.setenv("PERIGEE_LOGIN_FREE_FAILURES", "7")
    s = Settings()
    assert s.data_dir == Path("/srv/perigee") and s.secure_cookies is False
    assert s.login_free_failures == 7  # environment beats the file


def test_entrypoint_serves_on_unix_socket(tmp_path: Path, fake_gw: FakeGateway, sock_dir: Path) -> None:
    fake_gw.live_flows = [make_flow(1)]
    api_sock = sock_dir / "api.sock"
    env = {
        **os.environ,
        "PERIGEE_DATA_DIR": str(tmp_path / "data"),
        "PERIGEE_GATEWAY_SOCKET": str(fake_gw.socket_path),
        "PERIGEE_LISTEN": f"unix:{api_sock}",
        "PERIGEE_ALLOW_ROOT": "1",
        "PERIGEE_COLLECT_INTERVAL_S": "0.2",
    }
    proc = subprocess.Popen([sys.executable, "-m", "perigee_api"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + HUNG_S
        while not api_sock.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.time() < deadline, "API did not start"
            time.sleep(0.1)
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(api_sock)), base_url="http://api") as c:
            h = c.get("/api/v1/health").json()
            assert h["gateway_reachable"] is True
            while h["api"]["collector"]["ticks"] < 2 and time.time() < deadline:
                time.sleep(0.2)
                h = c.get("/api/v1/health").json()
            assert h["api"]["collector"]["ticks"] >= 2
        password = (tmp_path / "data" / "initial-admin-password").read_text().strip()
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=15)
    # The console names the file that holds the one-time password, never the password: logs are read by more
    # people (and kept by more programs) than a 0600 file.
    assert str(tmp_path / "data" / "initial-admin-password") in err
    assert password not in err


@pytest.mark.needs_root("the refusal is of root")
def test_entrypoint_refuses_root_without_opt_in(tmp_path: Path) -> None:
    env = {**os.environ, "PERIGEE_DATA_DIR": str(tmp_path)}
    env.pop("PERIGEE_ALLOW_ROOT", None)
    r = subprocess.run([sys.executable, "-m", "perigee_api"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "unprivileged" in r.stderr
    assert not (tmp_path / "perigee.sqlite3").exists()
