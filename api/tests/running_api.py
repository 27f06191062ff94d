"""`python -m perigee_api` as deployed, on a Unix socket in a temporary directory, for tests that need the real
server (uvicorn's own header handling, concurrent streams, nginx in front)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from satlab.testing import HUNG_S

API_DIR = Path(__file__).resolve().parents[1]
STRONG = "correct-horse-battery-staple"


@contextmanager
def running_api(data_dir: Path, socket: Path, gateway_socket: Path, **env: str) -> Iterator[Path]:
    """Starts the API on `socket` (secure cookies off: plain HTTP on the socket); yields the socket path."""
    full_env = {
        **os.environ,
        "PERIGEE_DATA_DIR": str(data_dir),
        "PERIGEE_GATEWAY_SOCKET": str(gateway_socket),
        "PERIGEE_LISTEN": f"unix:{socket}",
        "PERIGEE_ALLOW_ROOT": "1",
        "PERIGEE_COLLECTOR_ENABLED": "false",
        "PERIGEE_SECURE_COOKIES": "false",
        **env,
    }
    proc = subprocess.Popen([sys.executable, "-m", "perigee_api"], env=full_env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + HUNG_S
        while not socket.exists():
            assert proc.poll() is None and time.time() < deadline, "the API did not start"
            time.sleep(0.1)
        yield socket
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def unix_client(socket: Path, **kw: object) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(uds=str(socket)), base_url="http://api", **kw)  # type: ignore[arg-type]


def log_in_as_admin(c: httpx.Client, data_dir: Path) -> None:
    """Logs in with the one-time password, changes it to STRONG, and keeps the CSRF header on the client."""
    otp = (data_dir / "initial-admin-password").read_text().strip()
    csrf = c.get("/api/v1/auth/csrf").json()["csrf_token"]
    r = c.post("/api/v1/auth/login", json={"username": "admin", "password": otp}, headers={"X-CSRF-Token": csrf})
    assert r.status_code == 200, r.text
    c.headers["X-CSRF-Token"] = r.json()["csrf_token"]
    r = c.post("/api/v1/auth/change-password", json={"current_password": otp, "new_password": STRONG})
    assert r.status_code == 200, r.text
