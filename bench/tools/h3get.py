"""GET one URL over HTTP/3 (aioquic) and print what came back: a probe for the lab's QUIC origins.

`python -m bench.tools.h3get URL --ca CA.pem [--timeout 10]` (inside the client namespace) prints
one JSON object: {"ok", "status", "bytes", "alpn", "headers"}; exit 1 when no response arrived.
The server name comes from the URL; the address from the system resolver.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
from typing import Any
from urllib.parse import urlsplit


async def get(url: str, ca: str, timeout: float) -> dict[str, Any]:
    from aioquic.asyncio.client import connect
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import DataReceived, H3Event, HeadersReceived
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.events import QuicEvent

    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or 443
    addr = str(socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0][4][0])
    done: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

    class Client(QuicConnectionProtocol):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            self.h3 = H3Connection(self._quic)
            self.status, self.body = 0, b""
            self.headers: dict[str, str] = {}

        def quic_event_received(self, event: QuicEvent) -> None:
            for ev in self.h3.handle_event(event):
                self.h3_event(ev)

        def h3_event(self, ev: H3Event) -> None:
            if isinstance(ev, HeadersReceived):
                self.headers = {k.decode(): v.decode() for k, v in ev.headers}
                self.status = int(self.headers.get(":status", "0"))
            elif isinstance(ev, DataReceived):
                self.body += ev.data
            if getattr(ev, "stream_ended", False) and not done.done():
                done.set_result(
                    {
                        "ok": True,
                        "status": self.status,
                        "bytes": len(self.body),
                        "alpn": self._quic.tls.alpn_negotiated,
                        "headers": self.headers,
                    }
                )

    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=host)
    config.load_verify_locations(ca)
    async with connect(addr, port, configuration=config, create_protocol=Client) as client:
        assert isinstance(client, Client)
        stream = client._quic.get_next_available_stream_id()
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        client.h3.send_headers(
            stream,
            [
                (b":method", b"GET"),
                (b":scheme", b"https"),
                (b":authority", host.encode()),
                (b":path", path.encode()),
            ],
            end_stream=True,
        )
        client.transmit()
        return await asyncio.wait_for(done, timeout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.tools.h3get")
    ap.add_argument("url")
    ap.add_argument("--ca", required=True)
    ap.add_argument("--timeout", type=float, default=10.0)
    args = ap.parse_args(argv)
    try:
        out = asyncio.run(get(args.url, args.ca, args.timeout))
    except (OSError, TimeoutError, ConnectionError, ValueError) as exc:
        out = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(out))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
