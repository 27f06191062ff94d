"""The real nginx front (images/nginx/perigee.conf.template with perigee-site.conf.template) before the real API.

What only the pair shows: the client address the API records is nginx's $remote_addr whatever the client puts
in X-Forwarded-For or X-Real-IP; nginx's own refusals (400, 413, 414) come in the API's JSON error shape; a
backup as large as the API accepts gets through; TLS 1.2 offers no CBC suite; the HTTP redirect ignores Host.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import ssl
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from satlab.testing import HUNG_S, cannot_run
from tests.certs import certificate, make_key, write_pair
from tests.running_api import log_in_as_admin, running_api

IMAGES = Path(__file__).resolve().parents[2] / "images" / "nginx"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
SPOOF = "198.51.100.7"


@pytest.fixture(autouse=True, scope="module")
def nginx_installed() -> None:
    if not os.path.exists(NGINX):
        cannot_run("nginx is not installed (scripts/apt/api.txt lists it)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Front:
    https: int
    http: int
    data: Path

    @property
    def base(self) -> str:
        return f"https://127.0.0.1:{self.https}"

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base, verify=False, timeout=30)  # noqa: S501 - the test's own self-signed certificate


@pytest.fixture(scope="module")
def front() -> Iterator[Front]:
    root = Path(tempfile.mkdtemp(prefix="pgn", dir="/tmp"))  # short: the Unix socket path must fit
    run, tls, webui = root / "run", root / "tls", root / "webui"
    for d in (run, tls, webui):
        d.mkdir()
    (webui / "index.html").write_text("<!doctype html><title>perigee</title>")
    key = make_key()
    cert = certificate(key, "perigee-test", not_before=-timedelta(minutes=5), not_after=timedelta(days=1))
    write_pair(tls, key, cert)
    shutil.copy(IMAGES / "proxy_params.conf", run / "proxy_params.conf")
    hosts = subprocess.run(
        [str(IMAGES / "perigee-redirect-hosts"), "127.0.0.1", "localhost"], check=True, capture_output=True, text=True
    )
    (run / "redirect_hosts.conf").write_text(hosts.stdout)
    https, http = free_port(), free_port()
    api_sock = root / "api.sock"
    # Rendered by the same script the containers, the demo and the package use.
    env = dict(
        os.environ,
        NGINX_HTTPS_PORT=str(https),
        NGINX_HTTP_PORT=str(http),
        NGINX_LISTEN="127.0.0.1",
        NGINX_TLS_DIR=str(tls),
        NGINX_WEBUI_DIR=str(webui),
        NGINX_API_UPSTREAM=f"unix:{api_sock}",
        NGINX_PROXY_PARAMS=str(run / "proxy_params.conf"),
        NGINX_REDIRECT_HOSTS=str(run / "redirect_hosts.conf"),
        NGINX_RUN_DIR=str(run),
    )
    render = str(IMAGES / "perigee-nginx-render")
    site = IMAGES / "perigee-site.conf.template"
    subprocess.run([render, str(site), str(run / "perigee-site.conf")], env=env, check=True)
    subprocess.run([render, str(IMAGES / "perigee.conf.template"), str(run / "nginx.conf")], env=env, check=True)
    conf = (run / "nginx.conf").read_text()
    # As root, the workers must be able to open the API's socket (0770, root's): run them as root here.
    (run / "nginx.conf").write_text(("user root;\n" if os.geteuid() == 0 else "") + conf)
    data = root / "data"
    with running_api(data, api_sock, root / "no-gateway.sock", PERIGEE_SECURE_COOKIES="true"):
        subprocess.run([NGINX, "-t", "-q", "-c", str(run / "nginx.conf")], check=True, capture_output=True)
        subprocess.run([NGINX, "-c", str(run / "nginx.conf")], check=True)
        try:
            deadline = time.time() + HUNG_S
            while True:
                try:
                    health = httpx.get(f"https://127.0.0.1:{https}/api/v1/health", verify=False)  # noqa: S501
                    if health.status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.time() < deadline, "nginx + API did not answer"
                time.sleep(0.2)
            yield Front(https, http, data)
        finally:
            subprocess.run([NGINX, "-c", str(run / "nginx.conf"), "-s", "stop"], check=False)
            time.sleep(0.3)
            shutil.rmtree(root, ignore_errors=True)


def audit_addresses(front: Front) -> list[str]:
    with sqlite3.connect(front.data / "perigee.sqlite3") as db:
        return [r[0] for r in db.execute("SELECT address FROM audit_log WHERE action = 'login' ORDER BY id")]


def test_client_headers_cannot_choose_the_audited_address(front: Front) -> None:
    with front.client() as c:
        csrf = c.get("/api/v1/auth/csrf").json()["csrf_token"]
        for spoof in ({"X-Forwarded-For": SPOOF}, {"X-Real-IP": SPOOF}, {"X-Forwarded-For": f"{SPOOF}, 10.0.0.1"}):
            r = c.post(
                "/api/v1/auth/login",
                json={"username": "admin", "password": "wrong-password!"},
                headers={"X-CSRF-Token": csrf, **spoof},
            )
            assert r.status_code == 401, r.text
    assert audit_addresses(front)[-3:] == ["127.0.0.1"] * 3


def assert_api_error(r: httpx.Response, status: int, code: str) -> None:
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/json"), r.headers
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "field", "details"}
    assert body["error"]["code"] == code, body


def test_nginx_refusals_use_the_api_error_shape(front: Front) -> None:
    with front.client() as c:
        assert_api_error(c.post("/api/v1/policy/classes", content=b"x" * (1024 * 1024 + 1)), 413, "payload_too_large")
        assert_api_error(c.get("/api/v1/flows?" + "a" * 20_000), 414, "uri_too_long")
        assert_api_error(c.get("/api/v1/health", headers={"Cookie": "c=" + "x" * 20_000}), 400, "bad_request")
        # Also what the API itself refuses keeps its shape through nginx.
        assert_api_error(c.get("/api/v1/docs"), 404, "not_found")


def test_a_backup_as_large_as_the_api_accepts_gets_through(front: Front) -> None:
    with front.client() as c:
        log_in_as_admin(c, front.data)  # the one-time password, changed: the first login of this module
        big = json.dumps({"format": "perigee-backup", "padding": "x" * (3 * 1024 * 1024)}).encode()
        r = c.post("/api/v1/system/restore", files={"file": ("backup.json", big, "application/json")})
        # Past nginx (it was 2 MiB there): the API reads it and refuses it for what it is.
        assert_api_error(r, 422, "invalid_backup")
        too_big = b" " * (16 * 1024 * 1024 + 100 * 1024)
        r = c.post("/api/v1/system/restore", files={"file": ("backup.json", too_big, "application/json")})
        assert_api_error(r, 413, "payload_too_large")


def test_http_redirect_does_not_reflect_host(front: Front) -> None:
    for host in ("evil.example", "198.51.100.7", "127.0.0.1.evil.example"):
        r = httpx.get(f"http://127.0.0.1:{front.http}/flows?x=1", headers={"Host": host})
        assert r.status_code == 301
        assert r.headers["location"] == f"https://127.0.0.1:{front.https}/flows?x=1", host
    # The appliance's own names keep themselves.
    r = httpx.get(f"http://127.0.0.1:{front.http}/", headers={"Host": f"localhost:{front.http}"})
    assert r.headers["location"] == f"https://localhost:{front.https}/"


def tls12_handshake(front: Front, ciphers: str) -> str:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(ciphers)
    with (
        socket.create_connection(("127.0.0.1", front.https), timeout=10) as raw,
        ctx.wrap_socket(raw) as tls,
    ):
        cipher = tls.cipher()
        assert cipher is not None
        return cipher[0]


def test_tls12_offers_no_cbc_suites(front: Front) -> None:
    assert "GCM" in tls12_handshake(front, "ECDHE+AESGCM")
    assert "CHACHA20" in tls12_handshake(front, "ECDHE+CHACHA20")
    # Every TLS 1.2 CBC suite (SHA-1 and SHA-2 MACs) this OpenSSL knows: the server must refuse them all.
    with pytest.raises(ssl.SSLError):
        tls12_handshake(front, "ALL:!AESGCM:!CHACHA20:!AESCCM:!aNULL:!eNULL@SECLEVEL=0")
