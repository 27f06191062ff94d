"""TCP Fast Open against a pre-opened connection on the satellite leg: what a new flow's first
request costs with each (the measurement behind the peer path's design, docs/splitter.md).

Run on a plain lab (no gateway), hub and terminal namespaces with `net.ipv4.tcp_fastopen=3`:

    ip netns exec P-hub      python -m bench.tools.tfo_probe serve --port 9300
    ip netns exec P-terminal python -m bench.tools.tfo_probe client --to 10.71.2.2 ...

`serve` answers `GET <n> <pad>\\n` (a request line padded to the client's request size) with n
bytes, on a listener with TCP_FASTOPEN. `client` times, from the moment it has a request to send
to the first byte of the answer: `plain` (connect, then send), `tfo` (the request in the SYN with
MSG_FASTOPEN; the first one to a (source, destination) pair only fetches a cookie) and `warm`
(a connection opened beforehand, idle, then the request). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from typing import Any

TCP_FASTOPEN_QLEN = 4096


def serve(port: int) -> None:
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.setsockopt(socket.IPPROTO_TCP, socket.TCP_FASTOPEN, TCP_FASTOPEN_QLEN)
    ls.bind(("0.0.0.0", port))
    ls.listen(128)

    def one(conn: socket.socket) -> None:
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            line = b""
            while not line.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    return
                line += chunk
            n = int(line.split()[1])
            conn.sendall(b"x" * n)

    print(json.dumps({"ready": True}), flush=True)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=one, args=(c,), daemon=True).start()


def request(size: int, request_bytes: int) -> bytes:
    head = f"GET {size} ".encode()
    return head + b"p" * max(0, request_bytes - len(head) - 1) + b"\n"


def first_byte(s: socket.socket, size: int, t0: float) -> tuple[float, float]:
    first = s.recv(65536)
    t_first = time.monotonic() - t0
    got = len(first)
    while got < size:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += len(chunk)
    return t_first, time.monotonic() - t0


def one_request(mode: str, to: str, port: int, src: str | None, size: int, request_bytes: int) -> dict[str, Any]:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(20)
    if src:
        s.bind((src, 0))
    req = request(size, request_bytes)
    with s:
        if mode == "warm":
            s.connect((to, port))
            time.sleep(2.0)  # idle, like a pooled connection waiting for a flow
            t0 = time.monotonic()
            s.sendall(req)
        elif mode == "tfo":
            s.settimeout(None)  # blocking: without a cookie the call waits for the handshake
            t0 = time.monotonic()
            sent = s.sendto(req, socket.MSG_FASTOPEN, (to, port))
            s.settimeout(20)
            if sent < len(req):
                s.sendall(req[sent:])
        else:
            t0 = time.monotonic()
            s.connect((to, port))
            s.sendall(req)
        t_first, t_last = first_byte(s, size, t0)
    return {
        "mode": mode,
        "src": src,
        "request_bytes": len(req),
        "first_byte_s": round(t_first, 4),
        "last_byte_s": round(t_last, 4),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.tools.tfo_probe")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, default=9300)
    c = sub.add_parser("client")
    c.add_argument("--to", required=True)
    c.add_argument("--port", type=int, default=9300)
    c.add_argument(
        "--src",
        action="append",
        default=[],
        help="source addresses to try (one cookie each)",
    )
    c.add_argument("--size", type=int, default=10240)
    c.add_argument(
        "--request-bytes",
        type=int,
        action="append",
        default=[],
        help="request sizes (e.g. 300, and 1800 for a ClientHello with a post-quantum key share)",
    )
    a = ap.parse_args(argv)
    if a.cmd == "serve":
        serve(a.port)
        return 0
    results = []
    for req_bytes in a.request_bytes or [300]:
        for src in a.src or [None]:
            results.append(one_request("plain", a.to, a.port, src, a.size, req_bytes))
            results.append(one_request("tfo", a.to, a.port, src, a.size, req_bytes))  # first contact
            results.append(one_request("tfo", a.to, a.port, src, a.size, req_bytes))  # cookie cached
            results.append(one_request("warm", a.to, a.port, src, a.size, req_bytes))
    print(json.dumps({"ok": True, "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
