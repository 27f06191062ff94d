"""An HTTP/1.1 server that counts the request bodies it receives, by id (the peer path's
exactly-once tests and benchmark). `POST /post?id=N[&hold=S]` with any body: the id is counted once per body
received in full, the answer (`ok N`) is held S seconds first (a quiet connection to disturb);
`GET /counts` answers the counts as JSON. Prints {"ready": true} once listening.

    python -m satlab.countserver ADDR PORT
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from urllib.parse import parse_qs, urlsplit

COUNTS: Counter[str] = Counter()


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
        url = urlsplit(target)
        q = parse_qs(url.query)
        if method == "GET" and url.path == "/counts":
            body = json.dumps(dict(COUNTS)).encode()
        else:
            await reader.readexactly(int(headers.get("content-length", "0")))
            rid = q.get("id", ["?"])[0]
            COUNTS[rid] += 1
            hold = float(q.get("hold", ["0"])[0])
            if hold:
                await asyncio.sleep(hold)
            body = f"ok {rid}".encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
        await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, ValueError):
        pass
    finally:
        writer.close()


async def main(addr: str, port: int) -> None:
    server = await asyncio.start_server(handle, addr, port, backlog=1024)
    print(json.dumps({"ready": True}), flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
