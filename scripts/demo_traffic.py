#!/usr/bin/env python3
"""Background traffic for `make demo`: page loads, bulk downloads, an ESP flow and a bypassed TCP flow.

Three lanes run side by side so the dashboards always have something live: web (plain-HTTP page loads
and a few repeated objects, which the cache serves as HITs when it is on; HTTPS pages of the lab's web
by name, whose lookups the terminal's resolver answers, a few labels over and over so some names are
cold and most are cached), bulk (downloads and the odd upload) and IPsec (an ESP burst, then a TCP flow
on port 4500, which the built-in bypass never splits).
Runs until terminated (scripts/demo kills its whole process group). Every action is a subprocess with
an argument vector and a timeout; all traffic stays inside satlab's namespaces (client → server).
"""

from __future__ import annotations

import argparse
import random
import re
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urljoin

from satlab import webpages

ROOT = Path(__file__).resolve().parents[1]
SATLAB = str(ROOT / "bin" / "satlab")
SERVER = "10.71.3.10"
# TCP-encapsulated IKE: a built-in bypass rule, so this flow is never split.
BYPASS_PORT = 4500
ESP_PROTO = 50
# A handful of objects fetched again and again: the second fetch of each is a cache HIT.
REPEATED_OBJECTS = [f"http://{SERVER}/bytes/{n}" for n in (150_000, 400_000, 1_000_000)]
# The HTTPS pages' labels (webnames): a small pool, so a name is cold at the resolver once, then cached.
NAMED_PAGES = ("blog", "news")
LABELS = [secrets.token_hex(4) for _ in range(6)]


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)


def run(argv: list[str], timeout: float) -> int | None:
    """The exit code, or None on timeout."""
    try:
        return subprocess.run(
            argv,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        ).returncode
    except subprocess.TimeoutExpired:
        return None


def netns(prefix: str, name: str) -> list[str]:
    return ["ip", "netns", "exec", f"{prefix}{name}"]


def fetch(prefix: str, url: str, out: str | None = None) -> int | None:
    argv = [SATLAB, "--prefix", prefix, "fetch", "client", url]
    return run([*argv, "--out", out] if out else argv, 60)


def page_load(prefix: str) -> None:
    """The HTML page, then every image it names (as a browser would, one object after another)."""
    page = random.choice(["page1", "page2"])
    base = f"http://{SERVER}/pages/{page}/"
    with tempfile.NamedTemporaryFile(suffix=".html") as html:
        rc = fetch(prefix, base, html.name)
        images = re.findall(
            r'src="([^"]+)"', Path(html.name).read_text(errors="replace")
        )
    for src in images[:32]:
        fetch(prefix, urljoin(base, src))
    log(f"page load {page}: html rc={rc}, {len(images[:32])} images")


def named_page_load(prefix: str) -> None:
    """An HTTPS page of the lab's web and all its objects by name (one curl, HTTP/2, one connection per
    origin, as a browser opens them), verified with the lab's CA."""
    page = webpages.page(random.choice(NAMED_PAGES))
    label = random.choice(LABELS)
    argv = [*netns(prefix, "client"), "curl", "-sS", "--http2", "--max-time", "50",
            "--cacert", f"/run/satlab/{prefix}/web-tls/ca.pem"]
    for obj in page.objects:
        argv += ["-o", "/dev/null", page.url(obj, label)]
    log(f"https page {page.name} ({len(page.objects)} objects, label {label}): rc={run(argv, 60)}")


def repeated_object(prefix: str) -> None:
    url = random.choice(REPEATED_OBJECTS)
    log(f"object {url}: rc={fetch(prefix, url)}")


def bulk_transfer(prefix: str) -> None:
    op, size = random.choice(
        [("get", "2M"), ("get", "10M"), ("get", "30M"), ("get", "10M"), ("put", "2M")]
    )
    rc = run([SATLAB, "--prefix", prefix, "bulk", "client", op, size], 120)
    log(f"bulk {op} {size}: rc={rc}")


def esp_burst(prefix: str) -> None:
    rc = run(
        [*netns(prefix, "client"), sys.executable, __file__, "--send-esp", SERVER], 30
    )
    log(f"ESP burst (200 packets): rc={rc}")


def bypassed_flow(prefix: str) -> None:
    rc = run(
        [
            *netns(prefix, "client"),
            sys.executable,
            __file__,
            "--send-tcp",
            SERVER,
            str(BYPASS_PORT),
        ],
        60,
    )
    log(f"bypassed TCP flow to port {BYPASS_PORT}: rc={rc}")


def send_esp(dst: str) -> int:
    """Raw IP protocol 50 packets (a fake SPI and sequence numbers): the gateway must pass them untouched."""
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, ESP_PROTO) as s:
        for seq in range(1, 201):
            payload = (
                (0x1000).to_bytes(4, "big")
                + seq.to_bytes(4, "big")
                + random.randbytes(1000)
            )
            s.sendto(payload, (dst, 0))
            time.sleep(0.05)
    return 0


def send_tcp(dst: str, port: int) -> int:
    """20 s of data to the sink, paced to 2 Mbit/s so it shares the return link with the split flows."""
    block = bytes(16 * 1024)
    with socket.create_connection((dst, port), timeout=10) as s:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            s.sendall(block)
            time.sleep(len(block) * 8 / 2e6)
    return 0


def sink(port: int) -> int:
    """A TCP sink for the bypassed flow, run inside the server namespace."""
    srv = socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True)
    while True:
        conn, _ = srv.accept()
        with conn:
            while conn.recv(1 << 16):
                pass


def lane(
    name: str,
    prefix: str,
    actions: list[Callable[[str], None]],
    pause: tuple[float, float],
) -> None:
    """Runs its actions in turn forever; one failed action never stops the lane."""
    while True:
        for action in actions:
            try:
                action(prefix)
            except Exception as exc:  # noqa: BLE001 - keep the demo's traffic going whatever one action did
                log(f"{name}: {action.__name__} failed: {exc!r}")
            time.sleep(random.uniform(*pause))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--prefix", default="sl-")
    ap.add_argument("--send-esp", metavar="DST")
    ap.add_argument("--send-tcp", nargs=2, metavar=("DST", "PORT"))
    ap.add_argument("--sink", type=int, metavar="PORT")
    a = ap.parse_args()
    if a.send_esp:
        return send_esp(a.send_esp)
    if a.send_tcp:
        return send_tcp(a.send_tcp[0], int(a.send_tcp[1]))
    if a.sink:
        return sink(a.sink)

    subprocess.Popen(
        [
            *netns(a.prefix, "server"),
            sys.executable,
            __file__,
            "--sink",
            str(BYPASS_PORT),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    lanes = [
        ("web", [page_load, named_page_load, repeated_object, named_page_load], (1.0, 3.0)),
        ("bulk", [bulk_transfer], (2.0, 6.0)),
        ("ipsec", [esp_burst, bypassed_flow], (3.0, 8.0)),
    ]
    for name, actions, pause in lanes:
        threading.Thread(
            target=lane, args=(name, a.prefix, actions, pause), name=name, daemon=True
        ).start()
    log(
        f"traffic lanes running in satlab {a.prefix}: {', '.join(n for n, _, _ in lanes)}"
    )
    threading.Event().wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
