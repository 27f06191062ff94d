#!/usr/bin/env python3
"""Background traffic for `make demo`: page loads, bulk downloads, an ESP flow and a bypassed TCP flow.

Runs until terminated. Every action is a subprocess with an argument vector and a timeout, and all
traffic stays inside satlab's namespaces (client 10.71.1.10/.11 → server 10.71.3.10).
"""

from __future__ import annotations

import argparse
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urljoin

ROOT = Path(__file__).resolve().parents[1]
SATLAB = str(ROOT / "bin" / "satlab")
SERVER = "10.71.3.10"
BYPASS_PORT = (
    4500  # TCP-encapsulated IKE: a built-in bypass rule, so this flow is never split
)
ESP_PROTO = 50


def run(argv: list[str], timeout: float) -> None:
    try:
        subprocess.run(
            argv,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pass


def netns(prefix: str, name: str) -> list[str]:
    return ["ip", "netns", "exec", f"{prefix}{name}"]


def page_load(prefix: str) -> None:
    """The HTML page, then every image it names (as a browser would, one object after another)."""
    page = random.choice(["page1", "page2"])
    base = f"http://{SERVER}/pages/{page}/"
    with tempfile.NamedTemporaryFile(suffix=".html") as html:
        run(
            [SATLAB, "--prefix", prefix, "fetch", "client", base, "--out", html.name],
            60,
        )
        images = re.findall(
            r'src="([^"]+)"', Path(html.name).read_text(errors="replace")
        )
    for src in images[:32]:
        run([SATLAB, "--prefix", prefix, "fetch", "client", urljoin(base, src)], 60)


def bulk_download(prefix: str) -> None:
    size = random.choice(["2M", "10M", "30M"])
    run([SATLAB, "--prefix", prefix, "bulk", "client", "get", size], 120)


def esp_burst(prefix: str) -> None:
    run([*netns(prefix, "client"), sys.executable, __file__, "--send-esp", SERVER], 30)


def bypassed_flow(prefix: str) -> None:
    run(
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


def send_esp(dst: str) -> int:
    """Raw IP protocol 50 packets (a fake SPI and sequence numbers): the gateway must pass them untouched."""
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, ESP_PROTO) as s:
        for seq in range(1, 201):
            payload = (
                (0x1000).to_bytes(4, "big")
                + seq.to_bytes(4, "big")
                + bytes(random.getrandbits(8) for _ in range(1000))
            )
            s.sendto(payload, (dst, 0))
            time.sleep(0.05)
    return 0


def send_tcp(dst: str, port: int) -> int:
    with socket.create_connection((dst, port), timeout=10) as s:
        block = bytes(64 * 1024)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            s.sendall(block)
    return 0


def sink(port: int) -> int:
    """A TCP sink for the bypassed flow, run inside the server namespace."""
    srv = socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True)
    while True:
        conn, _ = srv.accept()
        with conn:
            while conn.recv(1 << 16):
                pass


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

    sink_proc = subprocess.Popen(
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
    signal.signal(signal.SIGTERM, lambda *_: (sink_proc.terminate(), sys.exit(0)))
    actions = [page_load, page_load, bulk_download, esp_burst, bypassed_flow]
    while True:
        random.choice(actions)(a.prefix)
        time.sleep(random.uniform(1, 4))


if __name__ == "__main__":
    raise SystemExit(main())
