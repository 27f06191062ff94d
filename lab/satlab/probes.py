"""Latency probes: small servers and clients that time what a user waits for on a new or open
connection, run inside the lab's namespaces.

`python -m satlab.probes serve --port 9101:exchange --port 9102:banner ...` (server namespace)
serves until killed; each port has one behaviour:

- `exchange`: request/response rounds. The client sends a 16-byte header (`EXCH`, request length,
  response length, tail length, all u32 big-endian) and the rest of its request; the server reads
  the whole request, then writes the response's first part, waits `--tail-gap-ms`, and writes the
  small tail. Nagle anywhere on the path holds a small segment back for a round trip.
- `banner`: the server speaks first (SMTP/SSH-like): `220 perigee-probe ready` on accept, then
  answers each line with `250 <line>` until `QUIT`.
- `whoami`: writes `<client address> <client port>` as it sees them, and closes.
- `object`: reads `GET <n>\\n` and writes n bytes (repeatable on one connection).
- `tls`: a TLS 1.3 server (self-signed, made at start with `openssl req`) that answers each line
  with the same line.

Clients (client namespace) print one JSON object:
`exchange ADDR PORT --rounds N`, `banner ADDR PORT`, `whoami ADDR PORT [--bind ADDR]`,
`first-byte ADDR PORT --size N`, `tls ADDR PORT`. Times are seconds from the client's connect()
call, measured with the monotonic clock. Every client sets TCP_NODELAY itself, so what a probe
sees of Nagle is the path's, not its own.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

EXCHANGE_MAGIC = b"EXCH"
EXCHANGE_HEADER = struct.Struct("!4sIII")
BANNER = b"220 perigee-probe ready\r\n"
MAX_REQUEST = 1 << 20


def _recv_exact(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(min(65536, n - len(out)))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def _recv_line(s: socket.socket, limit: int = 4096) -> bytes:
    out = bytearray()
    while not out.endswith(b"\n"):
        chunk = s.recv(1)
        if not chunk:
            raise ConnectionError("closed before the end of a line")
        out += chunk
        if len(out) > limit:
            raise ValueError("line too long")
    return bytes(out)


def _nodelay(s: socket.socket) -> None:
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


# --- servers ------------------------------------------------------------------------------------


def serve_exchange(conn: socket.socket, tail_gap_s: float) -> None:
    while True:
        try:
            head = _recv_exact(conn, EXCHANGE_HEADER.size)
        except ConnectionError:
            return
        magic, req, resp, tail = EXCHANGE_HEADER.unpack(head)
        if magic != EXCHANGE_MAGIC or max(req, resp, tail) > MAX_REQUEST or req < EXCHANGE_HEADER.size:
            return
        _recv_exact(conn, req - EXCHANGE_HEADER.size)
        conn.sendall(b"r" * resp)
        if tail:
            time.sleep(tail_gap_s)
            conn.sendall(b"t" * tail)


def serve_banner(conn: socket.socket) -> None:
    conn.sendall(BANNER)
    while True:
        line = _recv_line(conn).strip()
        if line == b"QUIT":
            conn.sendall(b"221 bye\r\n")
            return
        conn.sendall(b"250 " + line + b"\r\n")


def serve_whoami(conn: socket.socket, peer: tuple[Any, ...]) -> None:
    conn.sendall(f"{peer[0]} {peer[1]}\n".encode())


def serve_object(conn: socket.socket) -> None:
    while True:
        try:
            line = _recv_line(conn).split()
        except ConnectionError:
            return
        if len(line) != 2 or line[0] != b"GET" or not line[1].isdigit() or int(line[1]) > 1 << 30:
            return
        n = int(line[1])
        block = b"o" * 65536
        while n > 0:
            conn.sendall(block[: min(n, len(block))])
            n -= min(n, len(block))


def serve_tls_echo(conn: socket.socket, ctx: ssl.SSLContext) -> None:
    with ctx.wrap_socket(conn, server_side=True) as t:
        while True:
            line = _recv_line(t)
            t.sendall(line)


def self_signed(dirname: str) -> tuple[str, str]:
    """A throwaway certificate for the TLS probe (the client does not verify it)."""
    cert, key = os.path.join(dirname, "cert.pem"), os.path.join(dirname, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-nodes", "-days", "2", "-subj", "/CN=perigee-probe", "-keyout", key, "-out", cert],
                   check=True, capture_output=True, timeout=30)
    return cert, key


def serve(ports: list[tuple[int, str]], binds: list[str], tail_gap_s: float) -> None:
    tmp = tempfile.mkdtemp(prefix="probe-tls-")
    tls_ctx: ssl.SSLContext | None = None
    if any(mode == "tls" for _, mode in ports):
        cert, key = self_signed(tmp)
        tls_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls_ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        tls_ctx.load_cert_chain(cert, key)

    def handler(mode: str) -> Callable[[socket.socket, tuple[Any, ...]], None]:
        def handle(conn: socket.socket, peer: tuple[Any, ...]) -> None:
            with conn:
                _nodelay(conn)
                try:
                    if mode == "exchange":
                        serve_exchange(conn, tail_gap_s)
                    elif mode == "banner":
                        serve_banner(conn)
                    elif mode == "whoami":
                        serve_whoami(conn, peer)
                    elif mode == "object":
                        serve_object(conn)
                    elif mode == "tls" and tls_ctx is not None:
                        serve_tls_echo(conn, tls_ctx)
                except (OSError, ValueError, ssl.SSLError):
                    pass

        return handle

    listeners = []
    # Specific addresses when given: a wildcard listener cannot share a port (443) with the lab's web
    # origins, which listen on their own addresses in the same namespace.
    addrs = binds or ["0.0.0.0", "::"]
    for port, mode in ports:
        for addr in addrs:
            family = socket.AF_INET6 if ":" in addr else socket.AF_INET
            ls = socket.socket(family, socket.SOCK_STREAM)
            ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                ls.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            ls.bind((addr, port))
            ls.listen(512)
            listeners.append((ls, handler(mode)))

    def accept_loop(ls: socket.socket, handle: Callable[[socket.socket, tuple[Any, ...]], None]) -> None:
        while True:
            conn, peer = ls.accept()
            threading.Thread(target=handle, args=(conn, peer), daemon=True).start()

    for ls, handle in listeners:
        threading.Thread(target=accept_loop, args=(ls, handle), daemon=True).start()
    print(json.dumps({"ready": True, "ports": [p for p, _ in ports]}), flush=True)
    threading.Event().wait()


# --- clients ------------------------------------------------------------------------------------


def _connect(addr: str, port: int, timeout: float, bind: str | None = None) -> tuple[socket.socket, float]:
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(timeout)
    _nodelay(s)
    if bind:
        s.bind((bind, 0))
    t0 = time.monotonic()
    s.connect((addr, port))
    return s, t0


def exchange(addr: str, port: int, rounds: int, parts: list[int], response: int, tail: int,
             part_gap_s: float, timeout: float) -> dict[str, Any]:
    """`rounds` request/response exchanges on one connection; the request leaves in `parts`
    writes `part_gap_s` apart, the response is `response` bytes then a `tail`."""
    total = sum(parts)
    if parts[0] < EXCHANGE_HEADER.size:
        raise ValueError(f"the first part carries the {EXCHANGE_HEADER.size}-byte header")
    s, t0 = _connect(addr, port, timeout)
    connect_s = time.monotonic() - t0
    local_port = s.getsockname()[1]
    times = []
    with s:
        for _ in range(rounds):
            request = EXCHANGE_HEADER.pack(EXCHANGE_MAGIC, total, response, tail) + b"q" * (
                total - EXCHANGE_HEADER.size)
            start = time.monotonic()
            off = 0
            for i, n in enumerate(parts):
                if i:
                    time.sleep(part_gap_s)
                s.sendall(request[off:off + n])
                off += n
            _recv_exact(s, response + tail)
            times.append(time.monotonic() - start)
    return {"ok": True, "connect_s": connect_s, "rounds_s": times, "local_port": local_port}


def banner(addr: str, port: int, timeout: float) -> dict[str, Any]:
    s, t0 = _connect(addr, port, timeout)
    local_port = s.getsockname()[1]
    with s:
        connect_s = time.monotonic() - t0
        got = _recv_line(s)
        banner_s = time.monotonic() - t0
        s.sendall(b"HELO probe\r\n")
        reply = _recv_line(s)
        s.sendall(b"QUIT\r\n")
        bye = _recv_line(s)
    return {"ok": got == BANNER and reply.startswith(b"250") and bye.startswith(b"221"),
            "connect_s": connect_s, "banner_s": banner_s, "banner": got.decode(errors="replace").strip(),
            "local_port": local_port}


def whoami(addr: str, port: int, timeout: float, bind: str | None) -> dict[str, Any]:
    s, _ = _connect(addr, port, timeout, bind)
    with s:
        local = s.getsockname()
        line = _recv_line(s).decode().split()
    return {"ok": True, "seen_addr": line[0], "seen_port": int(line[1]), "local_addr": local[0],
            "local_port": local[1]}


def first_byte(addr: str, port: int, size: int, timeout: float) -> dict[str, Any]:
    s, t0 = _connect(addr, port, timeout)
    local_port = s.getsockname()[1]
    with s:
        connect_s = time.monotonic() - t0
        s.sendall(f"GET {size}\n".encode())
        first = s.recv(65536)
        first_s = time.monotonic() - t0
        if not first:
            raise ConnectionError("closed before the first byte")
        _recv_exact(s, size - len(first))
        last_s = time.monotonic() - t0
    return {"ok": True, "connect_s": connect_s, "first_byte_s": first_s, "last_byte_s": last_s,
            "local_port": local_port}


def tls(addr: str, port: int, timeout: float) -> dict[str, Any]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    s, t0 = _connect(addr, port, timeout)
    local_port = s.getsockname()[1]
    with s:
        connect_s = time.monotonic() - t0
        with ctx.wrap_socket(s, server_hostname="perigee-probe") as t:
            handshake_s = time.monotonic() - t0
            t.sendall(b"ping\n")
            echo = _recv_line(t)
            echo_s = time.monotonic() - t0
            version = t.version()
    return {"ok": echo == b"ping\n", "connect_s": connect_s, "handshake_s": handshake_s, "echo_s": echo_s,
            "version": version, "local_port": local_port}


def _port_mode(text: str) -> tuple[int, str]:
    port, _, mode = text.partition(":")
    if mode not in ("exchange", "banner", "whoami", "object", "tls"):
        raise argparse.ArgumentTypeError(f"unknown mode {mode!r}")
    return int(port), mode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="satlab.probes")
    sub = ap.add_subparsers(dest="tool", required=True)
    sv = sub.add_parser("serve")
    sv.add_argument("--port", type=_port_mode, action="append", required=True, help="PORT:MODE")
    sv.add_argument("--bind", action="append", default=[], help="listen on this address (repeatable; default: all)")
    sv.add_argument("--tail-gap-ms", type=float, default=20.0)
    for name in ("exchange", "banner", "whoami", "first-byte", "tls"):
        c = sub.add_parser(name)
        c.add_argument("addr")
        c.add_argument("port", type=int)
        c.add_argument("--timeout", type=float, default=30.0)
        if name == "exchange":
            c.add_argument("--rounds", type=int, default=3)
            c.add_argument("--parts", default="200,100", help="request write sizes, comma separated")
            c.add_argument("--response", type=int, default=10000)
            c.add_argument("--tail", type=int, default=300)
            c.add_argument("--part-gap-ms", type=float, default=20.0)
        if name == "whoami":
            c.add_argument("--bind")
        if name == "first-byte":
            c.add_argument("--size", type=int, default=10240)
    a = ap.parse_args(argv)
    if a.tool == "serve":
        serve(a.port, a.bind, a.tail_gap_ms / 1000)
        return 0
    try:
        if a.tool == "exchange":
            out = exchange(a.addr, a.port, a.rounds, [int(p) for p in a.parts.split(",")], a.response, a.tail,
                           a.part_gap_ms / 1000, a.timeout)
        elif a.tool == "banner":
            out = banner(a.addr, a.port, a.timeout)
        elif a.tool == "whoami":
            out = whoami(a.addr, a.port, a.timeout, a.bind)
        elif a.tool == "first-byte":
            out = first_byte(a.addr, a.port, a.size, a.timeout)
        else:
            out = tls(a.addr, a.port, a.timeout)
    except (OSError, ValueError, ssl.SSLError) as exc:
        out = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(out), flush=True)
    return 0 if out.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
