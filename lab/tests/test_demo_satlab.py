"""`make demo`'s default, end to end (root): `scripts/demo up` with a gateway at each end brings up the peer path,
the terminal's resolver (it answers the client LAN) and cache, and one dashboard per end; what it prints names
each end with its URL and one-time login; each dashboard answers over HTTPS with its own certificate, takes that
login and manages its own end; a flow from the lab client crosses the peer path; `scripts/demo down` leaves
nothing.

The demo runs under prefix dm- with its own state and run directories and free ports (PERIGEE_DEMO_PREFIX,
..._STATE_DIR, ..._RUN_DIR, the port variables), so it never touches a demo someone is looking at (sl-,
/var/lib/perigee-demo, 8443). Nothing here is a performance figure: the only time bounds mean "hung".
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import in_ns

from satlab import gateway, webnames
from satlab.testing import HUNG_S, cannot_run

pytestmark = pytest.mark.needs_root("network namespaces, the perigee user, nginx as www-data")

PREFIX = "dm-"
DEMO = str(gateway.REPO / "scripts" / "demo")
ROLES = ("terminal", "hub")
NEW_PASSWORD = "demo-test-Correct-Horse-42"
CLIENT4 = "10.71.1.10"
# The test's own flow leaves from these client ports: it is told apart from the traffic mix's by them.
OWN_PORTS = (46100, 46199)
# satlab up with two gateways, two APIs and nginx: about a minute on a quiet 2-core box; this means "hung".
UP_HUNG_S = 600


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Demo:
    env: dict[str, str]
    root: Path
    ports: dict[str, int]
    output: str
    changed: set[str] = field(default_factory=set)  # the ends whose one-time password the test has changed

    def dashboards(self) -> dict[str, tuple[str, str, str]]:
        """What `up` printed for each end: (its description, URL, one-time password), by role."""
        found = re.findall(
            r"^  (Terminal|Hub) (\(.*\))\n\s+Dashboard:\s+(\S+).*\n\s+Login:\s+admin / (\S+)", self.output, re.M
        )
        return {role.lower(): (what, url, password) for role, what, url, password in found}

    def cert(self, role: str) -> str:
        return str(self.root / "state" / role / "tls" / "cert.pem")

    def client(self, role: str) -> httpx.Client:
        """HTTPS to the end's dashboard, verified with that end's own certificate."""
        ctx = ssl.create_default_context(cafile=self.cert(role))
        return httpx.Client(base_url=self.dashboards()[role][1], verify=ctx, timeout=HUNG_S)


def demo_cmd(env: dict[str, str], *args: str, timeout: float = UP_HUNG_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DEMO, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False)


def demo_setup(prefix: str, tools: tuple[str, ...] = ()) -> tuple[dict[str, str], Path, dict[str, int]]:
    """What a demo of its own needs (its tools, root, a built dashboard), or the test cannot run; then its
    directory, free ports and environment under `prefix`, the demo's defaults otherwise."""
    if os.geteuid() != 0:
        cannot_run("needs root (network namespaces, the perigee user, nginx as www-data)")
    for tool in ("nginx", "openssl", "jq", *tools):
        if not shutil.which(tool):
            cannot_run(f"{tool} is not installed (scripts/apt lists it)")
    if not (gateway.REPO / "webui" / "dist" / "index.html").exists():
        cannot_run("the dashboard is not built (make build)")
    root = Path(tempfile.mkdtemp(prefix=f"perigee-{prefix}test-"))
    root.chmod(0o755)  # the API (user perigee) reaches its data directory through it
    ports = {"hub": free_port(), "hub_http": free_port(), "terminal": free_port(), "terminal_http": free_port()}
    env = dict(
        os.environ,
        PERIGEE_DEMO_PREFIX=prefix,
        PERIGEE_DEMO_STATE_DIR=str(root / "state"),
        PERIGEE_DEMO_RUN_DIR=str(root / "run"),
        PERIGEE_DEMO_PORT=str(ports["hub"]),
        PERIGEE_DEMO_HTTP_PORT=str(ports["hub_http"]),
        PERIGEE_DEMO_TERMINAL_PORT=str(ports["terminal"]),
        PERIGEE_DEMO_TERMINAL_HTTP_PORT=str(ports["terminal_http"]),
    )
    for name in ("PERIGEE_DEMO_GATEWAY", "PERIGEE_DEMO_CACHE", "PERIGEE_DEMO_PROFILE"):
        env.pop(name, None)  # the defaults are what these tests check
    return env, root, ports


@pytest.fixture(scope="module")
def demo() -> Iterator[Demo]:
    env, root, ports = demo_setup(PREFIX)
    demo_cmd(env, "down")
    try:
        up = demo_cmd(env, "up")
        assert up.returncode == 0, f"scripts/demo up: {up.returncode}\n{up.stdout[-3000:]}\n{up.stderr[-3000:]}"
        yield Demo(env, root, ports, up.stdout)
    finally:
        demo_cmd(env, "down")
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def logged_in(demo: Demo, role: str) -> Iterator[httpx.Client]:
    """A session on the end's dashboard: with the printed one-time password (changed at once, as the dashboard
    asks) the first time, with ours after that."""
    with demo.client(role) as c:
        csrf = c.get("/api/v1/auth/csrf").json()["csrf_token"]
        first = role not in demo.changed
        password = demo.dashboards()[role][2] if first else NEW_PASSWORD
        login = {"username": "admin", "password": password}
        r = c.post("/api/v1/auth/login", json=login, headers={"X-CSRF-Token": csrf})
        assert r.status_code == 200, f"{role}: {r.status_code} {r.text}"
        c.headers["X-CSRF-Token"] = r.json()["csrf_token"]
        if first:
            change = {"current_password": password, "new_password": NEW_PASSWORD}
            r = c.post("/api/v1/auth/change-password", json=change)
            assert r.status_code == 200, r.text
            demo.changed.add(role)
        yield c


def get(c: httpx.Client, path: str) -> Any:
    r = c.get(path)
    assert r.status_code == 200, f"{path}: {r.status_code} {r.text}"
    return r.json()


def test_it_says_which_dashboard_is_which_end(demo: Demo) -> None:
    shown = demo.dashboards()
    assert set(shown) == set(ROLES), demo.output
    for role in ROLES:
        what, url, password = shown[role]
        assert url == f"https://127.0.0.1:{demo.ports[role]}/"
        assert password == (demo.root / "state" / role / "api" / "initial-admin-password").read_text().strip()
    assert "peer path" in shown["terminal"][0] and "resolver" in shown["terminal"][0], shown
    assert "cache" in shown["terminal"][0] and "enrolled" in shown["hub"][0], shown
    assert "a gateway at each end, the peer path between them" in demo.output
    status = demo_cmd(demo.env, "status", timeout=HUNG_S)
    assert status.stdout.strip() == "demo: running (PERIGEE_DEMO_GATEWAY=both)", status.stdout


def test_each_dashboard_logs_in_and_manages_its_own_end(demo: Demo) -> None:
    for role in ROLES:
        # Over HTTP the dashboard only redirects to its own HTTPS port.
        plain = httpx.get(f"http://127.0.0.1:{demo.ports[role + '_http']}/", timeout=HUNG_S)
        assert plain.status_code == 301 and f":{demo.ports[role]}/" in plain.headers["location"]
        with demo.client(role) as anon:
            assert anon.get("/api/v1/flows").status_code == 401
        with logged_in(demo, role) as c:
            assert get(c, "/api/v1/auth/me")["username"] == "admin"
            health = get(c, "/api/v1/health")
            assert health["gateway_reachable"] and health["gateway"]["role"] == role, health
            assert health["gateway"]["peer"] is not None, f"{role}: the peer path is off"
            services = health["gateway"]["services"]
            assert services["squid"]["serving"], f"{role}'s cache is not serving: {services}"
            assert services["resolver"]["serving"] == (role == "terminal"), services
            assert "/assets/" in c.get("/").text  # the dashboard itself, beside its API


def test_the_hub_dashboard_shows_the_terminal_enrolled_and_connected(demo: Demo) -> None:
    with logged_in(demo, "hub") as c:
        deadline = time.monotonic() + HUNG_S
        while True:
            listing = get(c, "/api/v1/peer/terminals")
            site = next((t for t in listing["terminals"] if t["name"] == gateway.SITE_NAME), None)
            if (site and site["connected"]) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert listing["role"] == "hub" and site is not None, listing
        assert site["applied"] and site["connected"], site
        assert site["prefixes"] == gateway.CLIENT_SUBNETS


def client_run(argv: list[str]) -> str:
    out = subprocess.run(in_ns("client", argv, PREFIX), capture_output=True, text=True, timeout=HUNG_S, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_terminals_resolver_answers_the_client_lan(demo: Demo) -> None:
    """The client asks the lab's DNS server (an authoritative-only NSD behind the satellite); the answer comes
    from the terminal's resolver: recursion available, not authoritative."""
    name = webnames.host_of("img", "dnsdemo1")
    out = client_run(["drill", f"@{webnames.DNS_V4}", name, "A"])
    flags = re.search(r"^;; flags: ([a-z ]*);", out, re.M)
    assert flags is not None, out
    assert "ra" in flags.group(1).split() and "aa" not in flags.group(1).split(), out
    assert webnames.ORIGIN_BY_KEY["img"].v4 in out


def test_a_flow_from_the_lab_client_crosses_the_peer_path(demo: Demo) -> None:
    """An HTTPS download by name from the client: the terminal's dashboard records the flow with path "peer"."""
    url = webnames.page_url("news", "demotest")
    first, last = OWN_PORTS
    out = client_run(
        [
            "curl",
            "-sS",
            "--ipv4",
            "--cacert",
            f"/run/satlab/{PREFIX}/web-tls/ca.pem",
            "--local-port",
            f"{first}-{last}",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{local_port}",
            url,
        ]
    )
    code, port = out.split()
    assert code == "200"
    own = f"{CLIENT4}:{port}"
    with logged_in(demo, "terminal") as c:
        deadline = time.monotonic() + HUNG_S
        while True:
            page = get(c, f"/api/v1/flows/history?client={CLIENT4}&limit=1000")
            mine = [f for f in page["flows"] if f["client"] == own]
            if mine or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    assert mine, f"the terminal's dashboard recorded no flow from {own}"
    assert mine[0]["path"] == "peer", json.dumps(mine[0])
    assert mine[0]["server"] == f"{webnames.ORIGIN_BY_KEY['www'].v4}:{webnames.HTTPS_PORT}"


def test_down_removes_everything(demo: Demo) -> None:
    down = demo_cmd(demo.env, "down", timeout=UP_HUNG_S)
    assert down.returncode == 0, down.stderr
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert PREFIX not in netns, netns
    left = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(demo.root) in cmd or f"/run/satlab/{PREFIX}" in cmd or f"--prefix {PREFIX}" in cmd:
            left.append(cmd)
    assert not left, f"still running: {left}"
    assert not (demo.root / "run").exists() and not (demo.root / "state").exists()
    assert not Path(f"/run/satlab/{PREFIX}").exists()
    for port in demo.ports.values():
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0, f"something still listens on {port}"
    assert demo_cmd(demo.env, "status", timeout=HUNG_S).stdout.strip() == "demo: not running"
