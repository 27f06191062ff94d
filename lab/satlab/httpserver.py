"""The lab's HTTP/1.1 origin server (asyncio): keep-alive, pipelining, HEAD, conditional
requests, single byte ranges, deterministic bodies and the two test web pages.

Routes: /bytes/N, /nocache/bytes/N, /private/bytes/N, /whoami, /pages/page1/, /pages/page2/.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import formatdate, parsedate_to_datetime

from .content import MAX_BYTES, page_files, stream_bytes

LAST_MODIFIED_TS = 1704067200  # 2024-01-01T00:00:00Z: content never changes
LAST_MODIFIED = formatdate(LAST_MODIFIED_TS, usegmt=True)
CHUNK = 256 * 1024
MAX_HEADERS = 100
REASONS = {200: "OK", 206: "Partial Content", 301: "Moved Permanently", 304: "Not Modified",
           400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
           413: "Content Too Large", 416: "Range Not Satisfiable", 501: "Not Implemented"}


@dataclass
class Resource:
    length: int
    read: Callable[[int, int], bytes]  # (offset, length) -> bytes
    content_type: str
    cache_control: str
    etag: str | None = None
    last_modified: str | None = LAST_MODIFIED


@dataclass
class Request:
    method: str
    target: str
    version: str
    headers: dict[str, str]


class HttpError(Exception):
    def __init__(self, status: int, message: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.message = message or REASONS.get(status, "")


def _static(data: bytes, content_type: str, cache_control: str = "max-age=3600") -> Resource:
    etag = '"sl-' + hashlib.sha256(data).hexdigest()[:20] + '"'
    return Resource(len(data), lambda off, n: data[off:off + n], content_type, cache_control, etag)


_BYTES_RE = re.compile(r"^/(?:(nocache|private)/)?bytes/(\d+)$")
_PAGE_RE = re.compile(r"^/pages/(page[12])/([A-Za-z0-9_.-]*)$")
CACHE_POLICY = {None: "max-age=3600", "nocache": "no-store", "private": "private, max-age=3600"}


def resolve(path: str, peer: tuple[str, int]) -> Resource:
    m = _BYTES_RE.match(path)
    if m:
        n = int(m.group(2))
        if n > MAX_BYTES:
            raise HttpError(413, f"at most {MAX_BYTES} bytes")
        # Strong validator: the body is a pure function of the stream version and N.
        return Resource(n, stream_bytes, "application/octet-stream", CACHE_POLICY[m.group(1)],
                        f'"sl-v1-{n}"')
    if path == "/whoami":
        body = json.dumps({"addr": peer[0], "port": peer[1]}).encode() + b"\n"
        return Resource(len(body), lambda off, k: body[off:off + k], "application/json", "no-store",
                        None, None)
    m = _PAGE_RE.match(path)
    if m:
        files = page_files(m.group(1))
        name = m.group(2) or "index.html"
        if name not in files:
            raise HttpError(404)
        ctype = "text/html; charset=utf-8" if name.endswith(".html") else "image/png"
        return _static(files[name], ctype)
    if path == "/":
        body = (b"satlab origin server: /bytes/N /nocache/bytes/N /private/bytes/N /whoami "
                b"/pages/page1/ /pages/page2/\n")
        return _static(body, "text/plain; charset=utf-8", "no-store")
    raise HttpError(404)


def parse_range(value: str, length: int) -> tuple[int, int] | None:
    """(first, last) inclusive for a single 'bytes=' range; None means serve the whole body.
    Raises HttpError(416) when the range is syntactically fine but unsatisfiable."""
    m = re.fullmatch(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", value)
    if not m or (not m.group(1) and not m.group(2)):
        return None  # malformed or multiple ranges: ignore Range (RFC 9110 allows it)
    if m.group(1):
        first = int(m.group(1))
        last = int(m.group(2)) if m.group(2) else length - 1
        if m.group(2) and last < first:
            return None  # invalid: ignore
        if first >= length:
            raise HttpError(416)
        return first, min(last, length - 1)
    suffix = int(m.group(2))
    if suffix == 0:
        raise HttpError(416)
    return max(0, length - suffix), length - 1


def not_modified(req: Request, res: Resource) -> bool:
    inm = req.headers.get("if-none-match")
    if inm is not None:
        tags = [t.strip() for t in inm.split(",")]
        return res.etag is not None and ("*" in tags or res.etag in tags or f"W/{res.etag}" in tags)
    ims = req.headers.get("if-modified-since")
    if ims and res.last_modified:
        try:
            return parsedate_to_datetime(ims).timestamp() >= LAST_MODIFIED_TS
        except (TypeError, ValueError):
            return False
    return False


def head_block(status: int, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, '')}"]
    lines += [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    line = await reader.readline()
    while line in (b"\r\n", b"\n"):  # tolerate blank lines between pipelined requests
        line = await reader.readline()
    if not line:
        return None
    parts = line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise HttpError(400, "bad request line")
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADERS + 1):
        h = await reader.readline()
        if h in (b"\r\n", b"\n"):
            break
        if not h:
            return None
        name, sep, value = h.decode("latin-1").partition(":")
        if not sep:
            raise HttpError(400, "bad header")
        headers[name.strip().lower()] = value.strip()
    else:
        raise HttpError(400, "too many headers")
    return Request(parts[0], parts[1], parts[2], headers)


def keep_alive(req: Request) -> bool:
    conn = req.headers.get("connection", "").lower()
    if req.version == "HTTP/1.0":
        return "keep-alive" in conn
    return "close" not in conn


async def respond(req: Request, writer: asyncio.StreamWriter, peer: tuple[str, int], alive: bool) -> None:
    common = [("Date", formatdate(usegmt=True)), ("Server", "satlab"),
              ("Connection", "keep-alive" if alive else "close")]
    if req.method not in ("GET", "HEAD"):
        raise HttpError(405)
    path = req.target.split("?", 1)[0]
    if re.fullmatch(r"/pages/page[12]", path):
        writer.write(head_block(301, common + [("Location", path + "/"), ("Content-Length", "0")]))
        return
    res = resolve(path, peer)
    meta = [("Cache-Control", res.cache_control), ("Accept-Ranges", "bytes")]
    if res.etag:
        meta.append(("ETag", res.etag))
    if res.last_modified:
        meta.append(("Last-Modified", res.last_modified))
    if not_modified(req, res):
        writer.write(head_block(304, common + meta))
        return
    first, last, status = 0, res.length - 1, 200
    rng = req.headers.get("range")
    if_range = req.headers.get("if-range")
    if rng and req.method == "GET" and (if_range is None or if_range == res.etag):
        try:
            parsed = parse_range(rng, res.length)
        except HttpError:
            writer.write(head_block(416, common + meta + [("Content-Range", f"bytes */{res.length}"),
                                                          ("Content-Length", "0")]))
            return
        if parsed:
            first, last = parsed
            status = 206
            meta.append(("Content-Range", f"bytes {first}-{last}/{res.length}"))
    length = last - first + 1
    writer.write(head_block(status, common + meta + [("Content-Type", res.content_type),
                                                     ("Content-Length", str(length))]))
    if req.method == "HEAD":
        return
    pos, end = first, last + 1
    while pos < end:
        n = min(CHUNK, end - pos)
        writer.write(res.read(pos, n))
        pos += n
        await writer.drain()


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    peername = writer.get_extra_info("peername")
    peer = (str(peername[0]), int(peername[1]))
    try:
        while True:
            try:
                req = await read_request(reader)
            except HttpError as e:
                body = (e.message + "\n").encode()
                writer.write(head_block(e.status, [("Connection", "close"),
                                                   ("Content-Length", str(len(body)))]) + body)
                break
            if req is None:
                break
            if "transfer-encoding" in req.headers:
                writer.write(head_block(501, [("Connection", "close"), ("Content-Length", "0")]))
                break
            body_len = int(req.headers.get("content-length", "0") or 0)
            if body_len:
                await reader.readexactly(body_len)  # requests bodies are not used: discard
            alive = keep_alive(req)
            try:
                await respond(req, writer, peer, alive)
            except HttpError as e:
                body = (e.message + "\n").encode()
                hdrs = [("Connection", "keep-alive" if alive else "close"),
                        ("Content-Type", "text/plain"), ("Content-Length", str(len(body)))]
                if e.status == 405:
                    hdrs.append(("Allow", "GET, HEAD"))
                writer.write(head_block(e.status, hdrs) + (body if req.method != "HEAD" else b""))
            await writer.drain()
            if not alive:
                break
    except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
        pass
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, OSError):
            pass


async def serve(port: int, hosts: tuple[str, ...] = ("0.0.0.0", "::")) -> None:
    page_files("page1"), page_files("page2")  # build once before accepting
    server = await asyncio.start_server(handle, list(hosts), port, reuse_address=True, backlog=1024)
    async with server:
        await server.serve_forever()
