"""POSTs to countserver.py, each on its own connection, a few at a time; prints one JSON line:
which ids were answered (`ok ID`) and which failed (reset, closed early, timed out). The
exactly-once tests and benchmark compare them with what the server counted.

    python -m satlab.postload ADDR PORT --count N --concurrency C [--first ID] [--body BYTES] [--hold S]
                       [--marker TEXT]
"""

from __future__ import annotations

import argparse
import asyncio
import json

TIMEOUT_S = 60.0  # a POST still unanswered then is hung, not slow


async def post(addr: str, port: int, rid: int, body: bytes, hold: float) -> str:
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(addr, port), TIMEOUT_S)
    except (TimeoutError, OSError) as e:
        return f"connect: {type(e).__name__}"
    try:
        path = f"/post?id={rid}" + (f"&hold={hold}" if hold else "")
        writer.write(f"POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), TIMEOUT_S)
        return "answered" if answer.endswith(f"ok {rid}".encode()) else f"short answer: {answer[-40:]!r}"
    except (TimeoutError, OSError, asyncio.IncompleteReadError) as e:
        return f"failed: {type(e).__name__}"
    finally:
        writer.close()


async def main(a: argparse.Namespace) -> None:
    sem = asyncio.Semaphore(a.concurrency)
    body = (a.marker.encode() * (a.body // max(1, len(a.marker)) + 1))[: a.body] if a.marker else b"x" * a.body

    async def one(rid: int) -> tuple[int, str]:
        async with sem:
            return rid, await post(a.addr, a.port, rid, body, a.hold)

    results = await asyncio.gather(*(one(i) for i in range(a.first, a.first + a.count)))
    answered = [rid for rid, r in results if r == "answered"]
    failed = {str(rid): r for rid, r in results if r != "answered"}
    print(json.dumps({"answered": answered, "failed": failed}), flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("addr")
    p.add_argument("port", type=int)
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--body", type=int, default=600)
    p.add_argument("--hold", type=float, default=0.0)
    p.add_argument("--marker", default="")
    asyncio.run(main(p.parse_args()))
