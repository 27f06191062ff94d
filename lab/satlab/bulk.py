"""Bulk source/sink on TCP 5001, and its client.

Protocol (one command per connection, ASCII header line):
  "GET <n>\\n"  -> the server sends n bytes of the fixed stream (content.stream_bytes) and closes.
  "GET <n> <r>\\n" -> the same, paced at r bytes/s (a long flow that leaves the link room; the split
      gateways' buffers would take an unpaced stream whole, whatever the client reads).
  "PUT <n>\\n" followed by n bytes -> the server replies one JSON line
      {"ok": true, "bytes": n, "sha256": "<hex>", "duration_s": <first to last byte>} and closes.
Errors get {"ok": false, "error": "..."}. n is at most content.MAX_BYTES.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import time
from typing import Any

from .content import MAX_BYTES, iter_stream

PORT = 5001
RECV = 256 * 1024


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        line = (await reader.readline()).decode("ascii", "replace").split()
        paced = len(line) == 3 and line[0] == "GET" and line[2].isdigit() and int(line[2]) > 0
        if (len(line) != 2 and not paced) or line[0] not in ("GET", "PUT") or not line[1].isdigit() \
                or int(line[1]) > MAX_BYTES:
            writer.write(b'{"ok": false, "error": "expected GET <n> [<bytes/s>] or PUT <n>"}\n')
            return
        n = int(line[1])
        if line[0] == "GET":
            await send_stream(writer, n, int(line[2]) if paced else 0)
            return
        h, got, t0 = hashlib.sha256(), 0, 0.0
        while got < n:
            data = await reader.read(min(RECV, n - got))
            if not data:
                break
            if got == 0:
                t0 = time.monotonic()
            h.update(data)
            got += len(data)
        dur = time.monotonic() - t0 if got else 0.0
        reply = {"ok": got == n, "bytes": got, "sha256": h.hexdigest(), "duration_s": round(dur, 6)}
        if got != n:
            reply["error"] = f"connection closed after {got} of {n} bytes"
        writer.write(json.dumps(reply).encode() + b"\n")
        await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError, ValueError):
        pass
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, OSError):
            pass


async def send_stream(writer: asyncio.StreamWriter, n: int, rate: int) -> None:
    """n bytes of the fixed stream; at `rate` bytes/s in 50 ms slices when rate > 0."""
    chunk = 256 * 1024 if rate <= 0 else max(1024, rate // 20)
    t0, sent = time.monotonic(), 0
    for part in iter_stream(0, n, chunk):
        writer.write(part)
        await writer.drain()
        sent += len(part)
        if rate > 0:
            ahead = sent / rate - (time.monotonic() - t0)
            if ahead > 0:
                await asyncio.sleep(ahead)


async def serve(port: int = PORT, hosts: tuple[str, ...] = ("0.0.0.0", "::")) -> None:
    server = await asyncio.start_server(handle, list(hosts), port, reuse_address=True, backlog=1024)
    async with server:
        await server.serve_forever()


def _connect(addr: str, port: int, timeout: float) -> socket.socket:
    return socket.create_connection((addr, port), timeout=timeout)


def client(op: str, size: int, addr: str, port: int = PORT, timeout: float = 120.0) -> dict[str, Any]:
    """Run one GET or PUT; report bytes, duration (connect to last byte), goodput, sha256."""
    h, got = hashlib.sha256(), 0
    t0 = time.monotonic()
    with _connect(addr, port, timeout) as s:
        t_conn = time.monotonic()
        if op == "get":
            s.sendall(f"GET {size}\n".encode())
            while True:
                data = s.recv(RECV)
                if not data:
                    break
                h.update(data)
                got += len(data)
            server: dict[str, Any] = {}
        elif op == "put":
            s.sendall(f"PUT {size}\n".encode())
            for part in iter_stream(0, size):
                s.sendall(part)
                h.update(part)
                got += len(part)
            buf = b""
            while not buf.endswith(b"\n"):
                data = s.recv(4096)
                if not data:
                    break
                buf += data
            server = json.loads(buf.decode()) if buf else {"ok": False, "error": "no reply"}
        else:
            raise ValueError(f"bulk op must be get or put, not {op!r}")
    dur = time.monotonic() - t0
    return {"op": op, "server": addr, "port": port, "bytes": got, "duration_s": round(dur, 6),
            "connect_s": round(t_conn - t0, 6), "goodput_bps": round(got * 8 / dur, 1) if dur else 0.0,
            "sha256": h.hexdigest(), "complete": got == size and server.get("ok", True),
            "server_reply": server}
