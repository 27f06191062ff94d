"""The origin server over loopback (no root): headers, validators, ranges, HEAD, pipelining."""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import threading
from collections.abc import Iterator

import pytest

from satlab import bulk, content, httpclient, httpserver


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[int, int]]:
    http_port, bulk_port = _free_port(), _free_port()
    loop = asyncio.new_event_loop()

    async def both() -> None:
        await asyncio.gather(httpserver.serve(http_port, ("127.0.0.1",)), bulk.serve(bulk_port, ("127.0.0.1",)))

    task = loop.create_task(both())

    def run() -> None:
        try:
            loop.run_until_complete(task)
        except asyncio.CancelledError:
            pass

    t = threading.Thread(target=run, daemon=True)
    t.start()
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", http_port), timeout=1).close()
            socket.create_connection(("127.0.0.1", bulk_port), timeout=1).close()
            break
        except OSError:
            threading.Event().wait(0.02)
    yield http_port, bulk_port
    loop.call_soon_threadsafe(task.cancel)
    t.join(5)


def get(port: int, path: str, **headers: str) -> dict:  # type: ignore[type-arg]
    return httpclient.fetch(f"http://127.0.0.1:{port}{path}",
                            headers={k.replace("_", "-"): v for k, v in headers.items()})


def test_bytes_deterministic(server: tuple[int, int]) -> None:
    r = get(server[0], "/bytes/1000000")
    assert r["status"] == 200 and r["bytes"] == 1_000_000
    assert r["sha256"] == hashlib.sha256(content.stream_bytes(0, 1_000_000)).hexdigest()
    assert r["headers"]["cache-control"] == "max-age=3600"
    assert r["headers"]["etag"].startswith('"') and "last-modified" in r["headers"]
    assert get(server[0], "/bytes/1000000")["sha256"] == r["sha256"]


def test_cache_policies(server: tuple[int, int]) -> None:
    assert get(server[0], "/nocache/bytes/10")["headers"]["cache-control"] == "no-store"
    assert get(server[0], "/private/bytes/10")["headers"]["cache-control"].startswith("private")
    assert get(server[0], "/nocache/bytes/1000")["sha256"] == get(server[0], "/bytes/1000")["sha256"]


def test_etag_and_last_modified_give_304(server: tuple[int, int]) -> None:
    r = get(server[0], "/bytes/5000")
    etag = r["headers"]["etag"]
    r2 = get(server[0], "/bytes/5000", If_None_Match=etag)
    assert r2["status"] == 304 and r2["bytes"] == 0 and r2["headers"]["etag"] == etag
    assert get(server[0], "/bytes/5000", If_None_Match='"other"')["status"] == 200
    r3 = get(server[0], "/bytes/5000", If_Modified_Since=r["headers"]["last-modified"])
    assert r3["status"] == 304
    assert get(server[0], "/bytes/5001", If_None_Match=etag)["status"] == 200  # different entity


def test_ranges(server: tuple[int, int]) -> None:
    whole = content.stream_bytes(0, 100_000)
    r = get(server[0], "/bytes/100000", Range="bytes=1000-1999")
    assert r["status"] == 206 and r["bytes"] == 1000
    assert r["headers"]["content-range"] == "bytes 1000-1999/100000"
    assert r["sha256"] == hashlib.sha256(whole[1000:2000]).hexdigest()
    r = get(server[0], "/bytes/100000", Range="bytes=-500")
    assert r["status"] == 206 and r["sha256"] == hashlib.sha256(whole[-500:]).hexdigest()
    r = get(server[0], "/bytes/100000", Range="bytes=200000-")
    assert r["status"] == 416 and r["headers"]["content-range"] == "bytes */100000"
    r = get(server[0], "/bytes/100000", Range="bytes=0-9", If_Range='"stale"')
    assert r["status"] == 200 and r["bytes"] == 100_000


def test_whoami_and_pages_and_errors(server: tuple[int, int]) -> None:
    r = httpclient.fetch(f"http://127.0.0.1:{server[0]}/whoami")
    assert r["status"] == 200
    for name, html, total in (("page1", 356, 391 * 1024), ("page2", 1741, 669 * 1024)):
        r = get(server[0], f"/pages/{name}/")
        assert r["status"] == 200 and r["bytes"] == html
        assert r["headers"]["content-type"].startswith("text/html")
        files = content.page_files(name)
        got = sum(get(server[0], f"/pages/{name}/{f}")["bytes"] for f in files if f.endswith(".png"))
        assert got == total
    assert get(server[0], "/pages/page1")["status"] == 301
    assert get(server[0], "/nothing")["status"] == 404
    assert get(server[0], f"/bytes/{content.MAX_BYTES + 1}")["status"] == 413


def _raw(port: int, data: bytes, until: bytes, timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        buf = b""
        while until not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        return buf


def test_pipelining_keepalive_head_and_whoami_port(server: tuple[int, int]) -> None:
    reqs = (b"GET /bytes/10 HTTP/1.1\r\nHost: x\r\n\r\n"
            b"HEAD /bytes/20 HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /whoami HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    with socket.create_connection(("127.0.0.1", server[0]), timeout=5) as s:
        s.sendall(reqs)
        mine = s.getsockname()
        buf = b""
        while chunk := s.recv(65536):
            buf += chunk
    assert buf.count(b"HTTP/1.1 200 OK") == 3
    first, rest = buf.split(b"\r\n\r\n", 1)
    assert b"Content-Length: 10" in first and rest[:10] == content.stream_bytes(0, 10)
    head, rest = rest[10:].split(b"\r\n\r\n", 1)
    assert b"Content-Length: 20" in head and rest.startswith(b"HTTP/1.1 200 OK")  # HEAD: no body
    body = rest.split(b"\r\n\r\n", 1)[1]
    assert json.loads(body) == {"addr": mine[0], "port": mine[1]}
    assert b"405" in _raw(server[0], b"POST /bytes/1 HTTP/1.1\r\nContent-Length: 0\r\n\r\n", b"\r\n\r\n")


def test_bulk_protocol(server: tuple[int, int]) -> None:
    r = bulk.client("get", 300_000, "127.0.0.1", server[1])
    assert r["complete"] and r["sha256"] == hashlib.sha256(content.stream_bytes(0, 300_000)).hexdigest()
    r = bulk.client("put", 200_000, "127.0.0.1", server[1])
    assert r["complete"] and r["server_reply"]["sha256"] == r["sha256"]
    assert r["server_reply"]["bytes"] == 200_000
    assert b'"ok": false' in _raw(server[1], b"FLY 3\n", b"\n")
