"""A plain HTTP/1.1 page loader, the browser-free baseline of the web-page benchmark.

`python -m bench.browser.http_page URL [--connections 6]` (run inside the client namespace) GETs the
HTML on one keep-alive connection, then the page's <img> objects the way a browser does with
HTTP/1.1: the first connection is reused and up to `connections - 1` more are opened at once, each
taking the next image in document order as soon as it is free. No pipelining, no cache. Prints one
JSON object: load time (connect() of the first connection to the last byte of the last object),
and per object its timing, size, status and X-Cache header.
"""

from __future__ import annotations

import argparse
import json
import queue
import re
import socket
import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

RECV = 256 * 1024
IMG_SRC = re.compile(rb"<img\b[^>]*\bsrc=\"([^\"]+)\"", re.IGNORECASE)


class HttpError(RuntimeError):
    pass


@dataclass
class Fetched:
    url: str
    conn: int
    start_s: float  # request sent, since the page load started
    first_byte_s: float
    end_s: float
    status: int
    bytes: int
    x_cache: str


class Connection:
    """One keep-alive HTTP/1.1 connection; `get` sends a request and reads its whole response."""

    def __init__(self, host: str, port: int, ident: int, t0: float, timeout: float) -> None:
        self.ident, self.t0, self.host, self.buf = ident, t0, host, b""
        start = time.monotonic()
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connect_s = (start - t0, time.monotonic() - t0)

    def _fill(self) -> None:
        data = self.sock.recv(RECV)
        if not data:
            raise HttpError("connection closed mid-response")
        self.buf += data

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def _body(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def get(self, url: str) -> tuple[Fetched, bytes]:
        parts = urlsplit(url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\nUser-Agent: perigee-bench-http-page\r\n"
            "Accept: */*\r\nConnection: keep-alive\r\n\r\n"
        )
        start = time.monotonic() - self.t0
        self.sock.sendall(request.encode("latin-1"))
        status = int(self._line().split()[1])
        first = time.monotonic() - self.t0
        headers: dict[str, str] = {}
        while line := self._line():
            key, _, value = line.decode("latin-1").partition(":")
            key, value = key.strip().lower(), value.strip()
            # Repeated fields (X-Cache from two caches in a row) join with ", ", in order.
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = b""
            while size := int(self._line().split(b";")[0], 16):
                body += self._body(size)
                self._line()
            while self._line():  # trailers
                pass
        else:
            body = self._body(int(headers.get("content-length", "0")))
        end = time.monotonic() - self.t0
        return (
            Fetched(
                url,
                self.ident,
                start,
                first,
                end,
                status,
                len(body),
                headers.get("x-cache", ""),
            ),
            body,
        )

    def close(self) -> None:
        self.sock.close()


def image_urls(page_url: str, html: bytes) -> list[str]:
    """The page's <img src> objects, absolute, in document order."""
    return [urljoin(page_url, m.decode("latin-1")) for m in IMG_SRC.findall(html)]


def load(page_url: str, connections: int = 6, timeout: float = 60.0) -> dict[str, Any]:
    parts = urlsplit(page_url)
    host, port = parts.hostname or "", parts.port or 80
    t0 = time.monotonic()
    first = Connection(host, port, 0, t0, timeout)
    conns = [first]
    fetched: list[Fetched] = []
    try:
        html_rec, html = first.get(page_url)
        fetched.append(html_rec)
        todo: queue.Queue[str] = queue.Queue()
        images = image_urls(page_url, html)
        for url in images:
            todo.put(url)
        lock = threading.Lock()
        errors: list[str] = []

        def worker(conn: Connection | None, ident: int) -> None:
            try:
                if conn is None:
                    conn = Connection(host, port, ident, t0, timeout)
                    with lock:
                        conns.append(conn)
                while True:
                    try:
                        url = todo.get_nowait()
                    except queue.Empty:
                        return
                    rec, _ = conn.get(url)
                    with lock:
                        fetched.append(rec)
            except (OSError, HttpError, ValueError, IndexError) as exc:
                with lock:
                    errors.append(f"connection {ident}: {type(exc).__name__}: {exc}")

        n = max(1, min(connections, len(images)))
        threads = [threading.Thread(target=worker, args=(first if i == 0 else None, i), daemon=True) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout)
        if errors or not todo.empty() or len(fetched) != len(images) + 1:
            raise HttpError("; ".join(errors) or f"{len(fetched)} of {len(images) + 1} objects")
        failed = [f"{f.url}: {f.status}" for f in fetched if f.status != 200]
        if failed:
            raise HttpError("not 200: " + ", ".join(failed))
    finally:
        for c in conns:
            c.close()
    return {
        "ok": True,
        "url": page_url,
        "load_s": max(f.end_s for f in fetched),
        "html_end_s": html_rec.end_s,
        "connections": len(conns),
        "connect_s": sorted(c.connect_s for c in conns),
        "bytes": sum(f.bytes for f in fetched),
        "objects": [asdict(f) for f in sorted(fetched, key=lambda f: f.start_s)],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.browser.http_page")
    parser.add_argument("url")
    parser.add_argument("--connections", type=int, default=6)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    try:
        result = load(args.url, args.connections, args.timeout)
    except (OSError, HttpError, ValueError) as exc:
        result = {
            "ok": False,
            "url": args.url,
            "error": f"{type(exc).__name__}: {exc}"[:400],
        }
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
