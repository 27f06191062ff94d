"""The lab's HTTPS origins: HTTP/2 (and HTTP/1.1) over TLS on TCP 443 and HTTP/3 over QUIC on
UDP 443, on every origin address (satlab.webnames), serving the pages of satlab.webpages.

One asyncio process serves all origins: Hypercorn for TCP (ALPN h2, http/1.1) and aioquic for
QUIC (ALPN h3, CUBIC congestion control like the kernel's TCP, 1350-byte datagrams). Both answer
from the same function, so a page is byte for byte the same over either. Every response carries
`Timing-Allow-Origin: *` (so the browser's Resource Timing gives cross-origin DNS/TCP/TLS
breakdowns), `Access-Control-Allow-Origin: *` (the JSON fetch is cross-origin) and
`Alt-Svc: h3=":443"`. A request must arrive at the origin that owns the object (by its host name
and label): anything else is 421 Misdirected Request, so a test that passes used the right origin.

Routes: `/p/<page>/` (the HTML), `/p/<page>/<object>`, `/healthz`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from . import webpages
from .webnames import HTTPS_PORT, ORIGINS, WebNameError, split_host

PATH_RE = re.compile(r"^/p/([a-z]+)/([A-Za-z0-9_./-]*)$")
QUIC_DATAGRAM = 1350
CACHE_CONTROL = "public, max-age=86400"


@dataclass(frozen=True)
class Reply:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


def _text(status: int, msg: str) -> Reply:
    body = (msg + "\n").encode()
    return Reply(status, [("content-type", "text/plain; charset=utf-8"), ("content-length", str(len(body))),
                          ("cache-control", "no-store")], body)


def answer(method: str, host: str, path: str) -> Reply:
    """The response to one request, whatever the protocol."""
    if method not in ("GET", "HEAD"):
        return _text(405, "GET or HEAD only")
    if path == "/healthz":
        return _text(200, "ok")
    m = PATH_RE.match(path.split("?", 1)[0])
    if not m:
        return _text(404, "not found")
    page_name, obj_path = m.group(1), m.group(2)
    try:
        origin, label = split_host(host)
        obj = webpages.page(page_name).by_path().get(obj_path)
    except (WebNameError, webpages.PageError) as exc:
        return _text(404 if isinstance(exc, webpages.PageError) else 421, str(exc))
    if obj is None:
        return _text(404, "no such object")
    if obj.origin != origin.key:
        return _text(421, f"{obj_path} is served by the {obj.origin} origin, not {origin.key}")
    body = webpages.body(page_name, obj_path, label)
    headers = [("content-type", webpages.CONTENT_TYPES[obj.kind]), ("content-length", str(len(body))),
               ("cache-control", CACHE_CONTROL), ("timing-allow-origin", "*"),
               ("access-control-allow-origin", "*"), ("alt-svc", f'h3=":{HTTPS_PORT}"; ma=86400')]
    return Reply(200, headers, body if method == "GET" else b"")


# --- HTTP/2 and HTTP/1.1: Hypercorn (ASGI) ------------------------------------------------------

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def asgi_app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), "")
    reply = answer(scope["method"], host, scope["path"])
    await send({"type": "http.response.start", "status": reply.status,
                "headers": [(k.encode(), v.encode()) for k, v in reply.headers]})
    await send({"type": "http.response.body", "body": reply.body})


def _bind(addr: str) -> str:
    return f"[{addr}]:{HTTPS_PORT}" if ":" in addr else f"{addr}:{HTTPS_PORT}"


async def serve_tcp(certfile: str, keyfile: str, addrs: list[str], stop: asyncio.Event) -> None:
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    config = Config()
    config.bind = [_bind(a) for a in addrs]
    config.certfile, config.keyfile = certfile, keyfile
    config.alpn_protocols = ["h2", "http/1.1"]
    config.accesslog = None
    config.errorlog = None
    config.keep_alive_timeout = 120
    await serve(asgi_app, config, shutdown_trigger=stop.wait)  # type: ignore[arg-type]


# --- HTTP/3: aioquic ----------------------------------------------------------------------------

def _quic_protocol() -> type:
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import HeadersReceived
    from aioquic.quic.events import ProtocolNegotiated, QuicEvent

    class H3Origin(QuicConnectionProtocol):
        """One QUIC connection: each request's headers are enough to answer it (GET/HEAD only)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._h3: H3Connection | None = None

        def quic_event_received(self, event: QuicEvent) -> None:
            if isinstance(event, ProtocolNegotiated) and event.alpn_protocol in H3_ALPN:
                self._h3 = H3Connection(self._quic)
            if self._h3 is None:
                return
            for ev in self._h3.handle_event(event):
                if isinstance(ev, HeadersReceived):
                    fields = {k: v.decode("latin-1") for k, v in ev.headers}
                    reply = answer(fields.get(b":method", ""), fields.get(b":authority", ""),
                                   fields.get(b":path", "/"))
                    self._h3.send_headers(ev.stream_id, [(b":status", str(reply.status).encode())]
                                          + [(k.encode(), v.encode()) for k, v in reply.headers],
                                          end_stream=not reply.body)
                    if reply.body:
                        self._h3.send_data(ev.stream_id, reply.body, end_stream=True)
            self.transmit()

    return H3Origin


async def serve_quic(certfile: str, keyfile: str, addrs: list[str]) -> list[Any]:
    from aioquic.asyncio.server import serve
    from aioquic.h3.connection import H3_ALPN
    from aioquic.quic.configuration import QuicConfiguration

    config = QuicConfiguration(is_client=False, alpn_protocols=H3_ALPN, congestion_control_algorithm="cubic",
                               max_datagram_size=QUIC_DATAGRAM, idle_timeout=120.0)
    config.load_cert_chain(certfile, keyfile)
    protocol = _quic_protocol()
    return [await serve(a, HTTPS_PORT, configuration=config, create_protocol=protocol) for a in addrs]


def origin_addresses() -> list[str]:
    return [o.v4 for o in ORIGINS] + [o.v6 for o in ORIGINS]


async def serve(certfile: str, keyfile: str) -> None:
    """Both servers on every origin address until cancelled (SIGTERM ends the process)."""
    for name in webpages.PAGE_NAMES:  # build the images once, before the first request
        for obj in webpages.page(name).objects:
            if obj.kind == "img":
                webpages.body(name, obj.path, "00000000")
    addrs = origin_addresses()
    quic = await serve_quic(certfile, keyfile, addrs)
    stop = asyncio.Event()
    try:
        await serve_tcp(certfile, keyfile, addrs, stop)
    finally:
        for server in quic:
            server.close()
