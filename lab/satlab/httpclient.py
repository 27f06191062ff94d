"""A small HTTP/1.1 client for `satlab fetch`: one GET, body hashed and timed."""

from __future__ import annotations

import hashlib
import socket
import time
from typing import IO, Any
from urllib.parse import urlsplit

RECV = 256 * 1024


class _Conn:
    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.buf = sock, b""

    def fill(self) -> bool:
        data = self.sock.recv(RECV)
        self.buf += data
        return bool(data)

    def line(self) -> bytes:
        while b"\n" not in self.buf:
            if not self.fill():
                raise ConnectionError("connection closed inside headers")
        line, _, self.buf = self.buf.partition(b"\n")
        return line.rstrip(b"\r")

    def take(self, limit: int) -> bytes:
        if not self.buf and not self.fill():
            return b""
        out, self.buf = self.buf[:limit], self.buf[limit:]
        return out


def fetch(url: str, out: IO[bytes] | None = None, timeout: float = 120.0,
          headers: dict[str, str] | None = None) -> dict[str, Any]:
    u = urlsplit(url)
    if u.scheme != "http" or not u.hostname:
        raise ValueError(f"only http:// URLs: {url!r}")
    port = u.port or 80
    path = (u.path or "/") + (f"?{u.query}" if u.query else "")
    host_hdr = f"[{u.hostname}]" if ":" in u.hostname else u.hostname
    if u.port:
        host_hdr += f":{u.port}"
    req = [f"GET {path} HTTP/1.1", f"Host: {host_hdr}", "User-Agent: satlab-fetch", "Connection: close"]
    req += [f"{k}: {v}" for k, v in (headers or {}).items()]
    h, got = hashlib.sha256(), 0
    t0 = time.monotonic()
    with socket.create_connection((u.hostname, port), timeout=timeout) as s:
        t_conn = time.monotonic()
        s.sendall(("\r\n".join(req) + "\r\n\r\n").encode("latin-1"))
        c = _Conn(s)
        status_line = c.line().decode("latin-1")
        t_first = time.monotonic()
        status = int(status_line.split()[1])
        resp_headers: dict[str, str] = {}
        while line := c.line():
            k, _, v = line.decode("latin-1").partition(":")
            resp_headers[k.strip().lower()] = v.strip()

        def sink(data: bytes) -> None:
            nonlocal got
            h.update(data)
            got += len(data)
            if out is not None:
                out.write(data)

        if status in (204, 304) or 100 <= status < 200:
            pass
        elif "chunked" in resp_headers.get("transfer-encoding", "").lower():
            while True:
                size = int(c.line().split(b";")[0], 16)
                if size == 0:
                    while c.line():
                        pass
                    break
                left = size
                while left:
                    part = c.take(left)
                    if not part:
                        raise ConnectionError("connection closed inside a chunk")
                    sink(part)
                    left -= len(part)
                c.line()
        elif "content-length" in resp_headers:
            left = int(resp_headers["content-length"])
            while left:
                part = c.take(left)
                if not part:
                    break
                sink(part)
                left -= len(part)
        else:
            while part := c.take(RECV):
                sink(part)
    dur = time.monotonic() - t0
    return {"url": url, "status": status, "bytes": got, "duration_s": round(dur, 6),
            "connect_s": round(t_conn - t0, 6), "ttfb_s": round(t_first - t0, 6),
            "goodput_bps": round(got * 8 / dur, 1) if dur else 0.0, "sha256": h.hexdigest(),
            "headers": resp_headers}
