"""The control plane in the soak: the real API (`python -m perigee_api`) on the hub gateway's control
socket, its data dir (the SQLite database) on a small tmpfs of its own, restarted like the packaged unit
(debian/perigee-management.perigee-api.service: Restart=always, RestartSec=2) by satlab's supervisor;
an admin logged in through the API's own first-login flow; and the control-plane load, which reads
every 0.5 s and stores and applies a harmless config change every 10 s, recording every answer."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.soak import gwprocs
from satlab import gwsupervise

RESTART_SEC = 2.0  # the packaged unit's RestartSec
READ_EVERY_S = 0.5
WRITE_EVERY_S = 10.0
READ_TIMEOUT_S = 30.0
# An apply waits for the gateway (its own timeout is 10 s); beyond this a request counts as hung.
WRITE_TIMEOUT_S = 60.0
READS = (
    "/api/v1/health",
    "/api/v1/flows",
    "/api/v1/stats/series?metric=link_bps",
)
ADMIN_PASSWORD = "soak-control-plane-admin-passphrase"
DATA_MB = 64


@dataclass(frozen=True)
class Call:
    """One request of the control-plane load: status 0 = no answer (refused, reset), -1 = timed out."""

    t0: float
    t1: float
    kind: str  # "read" | "write" | "apply"
    path: str
    status: int
    code: str = ""  # the error's code from the API's error shape, or the transport error's name


class Api:
    """Where the soak's API lives and how to reach it: paths under satlab's run dir, an HTTP client on
    its Unix socket."""

    def __init__(self, run_dir: str, gateway_socket: str) -> None:
        self.run_dir = Path(run_dir)
        self.gateway_socket = gateway_socket
        self.data_dir = self.run_dir / "api-data"
        self.socket = self.run_dir / "api.sock"
        self.pidfile = self.run_dir / "api.pid"
        self.log = self.run_dir / "api.log"
        self.database = self.data_dir / "perigee.sqlite3"
        # Serialises what must not interleave with a config apply through the API: the soak's own
        # applies with the test-only fault hook (its step file is read by both daemons) and the
        # comparisons of the API's versions with what the gateway runs.
        self.write_lock = threading.Lock()

    def pid(self) -> int | None:
        return gwprocs.read_pid(str(self.pidfile))

    def client(self, timeout: float = READ_TIMEOUT_S) -> httpx.Client:
        return httpx.Client(
            transport=httpx.HTTPTransport(uds=str(self.socket)),
            base_url="http://perigee-api",
            timeout=timeout,
        )

    def log_in(self, c: httpx.Client) -> None:
        """The API's first-login flow on a fresh data dir (the one-time password it wrote, then a new
        password), or a plain login once that is done; the client keeps the session cookie and sends
        the CSRF token."""
        otp_file = self.data_dir / "initial-admin-password"
        csrf = c.get("/api/v1/auth/csrf").json()["csrf_token"]
        first = otp_file.exists()
        password = otp_file.read_text().strip() if first else ADMIN_PASSWORD
        r = c.post(
            "/api/v1/auth/login",
            json={"username": "admin", "password": password},
            headers={"X-CSRF-Token": csrf},
        )
        if r.status_code != 200:
            raise RuntimeError(f"API login: {r.status_code} {r.text[:300]}")
        c.headers["X-CSRF-Token"] = r.json()["csrf_token"]
        if first:
            r = c.post(
                "/api/v1/auth/change-password",
                json={"current_password": password, "new_password": ADMIN_PASSWORD},
            )
            if r.status_code != 200:
                raise RuntimeError(f"API change-password: {r.status_code} {r.text[:300]}")

    def wait_answering(self, c: httpx.Client, timeout: float, path: str = "/api/v1/auth/me") -> float | None:
        """Seconds until a read of `path` answers 200 (by default an authenticated one); None when it
        did not within timeout."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            with contextlib.suppress(httpx.HTTPError):
                if c.get(path, timeout=2.0).status_code == 200:
                    return time.monotonic() - t0
            time.sleep(0.05)
        return None


@contextlib.contextmanager
def running(api: Api) -> Iterator[None]:
    """The API under satlab's supervisor (the packaged unit's restart policy), until the block ends."""
    env = {
        **os.environ,
        "PERIGEE_DATA_DIR": str(api.data_dir),
        "PERIGEE_GATEWAY_SOCKET": api.gateway_socket,
        "PERIGEE_LISTEN": f"unix:{api.socket}",
        "PERIGEE_SECURE_COOKIES": "false",  # plain HTTP on the Unix socket
        "PERIGEE_INITIAL_ROLE": "hub",
        "PERIGEE_TLS_DIR": str(api.run_dir / "api-tls"),
        # The soak runs as root (namespaces, tmpfs); the packaged unit runs the API as user perigee.
        "PERIGEE_ALLOW_ROOT": "1",
    }
    argv = gwsupervise.argv(str(api.pidfile), RESTART_SEC, [sys.executable, "-m", "perigee_api"])
    with open(api.log, "ab") as log:
        sup = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        with api.client() as c:
            if api.wait_answering(c, 60.0, "/api/v1/auth/csrf") is None:
                raise RuntimeError(f"the API did not start (log: {api.log})")
        yield
    finally:
        sup.send_signal(signal.SIGTERM)
        try:
            sup.wait(timeout=20)
        except subprocess.TimeoutExpired:
            sup.kill()
            sup.wait()


@dataclass
class Load:
    """The control-plane load, in a thread: reads every READ_EVERY_S in turn, and every WRITE_EVERY_S
    the desired config with splitter.idle_timeout_s moved by one second (back and forth between two
    values: nothing a flow notices) stored as a new version and applied through the API."""

    api: Api
    idle_timeout_s: int
    calls: list[Call] = field(default_factory=list)
    written: list[int] = field(default_factory=list)  # versions the API confirmed (200)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="soak-api-load", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=WRITE_TIMEOUT_S * 3)

    def _call(
        self,
        c: httpx.Client,
        kind: str,
        method: str,
        path: str,
        body: Any = None,
        timeout: float = READ_TIMEOUT_S,
    ) -> tuple[int, Any]:
        t0 = time.monotonic()
        status, code, reply = 0, "", None
        try:
            r = c.request(method, path, json=body, timeout=timeout)
            status = r.status_code
            try:
                reply = r.json()
            except ValueError:
                code = "not_json"
            if status >= 400 and isinstance(reply, dict):
                code = str((reply.get("error") or {}).get("code", "no_error_shape"))
        except httpx.TimeoutException:
            status, code = -1, "timeout"
        except httpx.HTTPError as e:
            code = type(e).__name__
        self.calls.append(Call(t0, time.monotonic(), kind, path.split("?")[0], status, code))
        return status, reply

    def _write(self, c: httpx.Client, n: int) -> None:
        status, desired = self._call(c, "read", "GET", "/api/v1/config")
        if status != 200:
            return
        cfg = desired["config"]
        cfg["splitter"]["idle_timeout_s"] = self.idle_timeout_s + n % 2
        with self.api.write_lock:
            status, reply = self._call(
                c,
                "write",
                "PUT",
                "/api/v1/config",
                {"config": cfg, "comment": f"soak control-plane write {n}"},
                WRITE_TIMEOUT_S,
            )
            if status != 200:
                return
            vid = int(reply["version_id"])
            self.written.append(vid)
            status, reply = self._call(
                c,
                "apply",
                "POST",
                f"/api/v1/versions/{vid}/apply",
                None,
                WRITE_TIMEOUT_S,
            )
            if status == 200 and not reply.get("ok"):
                # The gateway refused it (or was down): answered, recorded on the version, not active.
                self.calls[-1] = dataclasses.replace(self.calls[-1], code="not_applied")

    def _run(self) -> None:
        with self.api.client() as c:
            self.api.log_in(c)
            t_next_write = time.monotonic() + WRITE_EVERY_S
            i = n = 0
            while not self._stop.is_set():
                t = time.monotonic()
                self._call(c, "read", "GET", READS[i % len(READS)])
                i += 1
                if time.monotonic() >= t_next_write:
                    n += 1
                    self._write(c, n)
                    t_next_write += WRITE_EVERY_S
                self._stop.wait(max(0.0, READ_EVERY_S - (time.monotonic() - t)))
