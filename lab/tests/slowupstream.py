"""A resolver behind the hub that answers a broken domain late: what a real recursive resolver does
when a domain's servers do not answer (lab tests; run it in the server namespace).

`python slowupstream.py ADDR FORWARD --broken-zone ZONE --delay S`

Listens on ADDR port 53, UDP and TCP (DNS over TCP, several queries on a connection, each answered
as soon as it is ready, in any order). A name in ZONE gets SERVFAIL after S seconds; every other
query is passed to FORWARD (the lab's authoritative server) over UDP and its answer relayed.
Prints "ready" once both listeners are bound, then "query NAME TYPE" for each query it receives.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import struct
from typing import cast


def qname(msg: bytes) -> str:
    labels, o = [], 12
    while o < len(msg) and msg[o]:
        n = msg[o]
        labels.append(msg[o + 1 : o + 1 + n].decode("ascii", "replace").lower())
        o += 1 + n
    return ".".join(labels)


def servfail(query: bytes) -> bytes:
    # QR set, opcode and RD kept, RA set, RCODE 2; the question kept, no records.
    flags = 0x8000 | (struct.unpack(">H", query[2:4])[0] & 0x7900) | 0x0080 | 2
    return query[:2] + struct.pack(">HHHHH", flags, 1, 0, 0, 0) + query[12:question_end(query)]


def question_end(msg: bytes) -> int:
    o = 12
    while o < len(msg) and msg[o]:
        o += 1 + msg[o]
    return o + 5


class Upstream:
    def __init__(self, forward: str, zone: str, delay: float) -> None:
        self.forward = forward
        self.zone = zone.strip(".").lower()
        self.delay = delay

    async def answer(self, query: bytes) -> bytes | None:
        if len(query) < 17:
            return None
        name = qname(query)
        end = question_end(query)
        print(f"query {name} {struct.unpack('>H', query[end - 4 : end - 2])[0]}", flush=True)
        if name == self.zone or name.endswith("." + self.zone):
            await asyncio.sleep(self.delay)
            return servfail(query)
        loop = asyncio.get_running_loop()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.setblocking(False)
            await loop.sock_connect(s, (self.forward, 53))
            await loop.sock_sendall(s, query)
            try:
                return await asyncio.wait_for(loop.sock_recv(s, 65535), 5.0)
            except TimeoutError:
                return None

    async def stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        lock = asyncio.Lock()
        tasks: set[asyncio.Task[None]] = set()

        async def one(query: bytes) -> None:
            reply = await self.answer(query)
            if reply is not None:
                async with lock:
                    writer.write(struct.pack(">H", len(reply)) + reply)
                    await writer.drain()

        try:
            while True:
                head = await reader.readexactly(2)
                query = await reader.readexactly(struct.unpack(">H", head)[0])
                task = asyncio.create_task(one(query))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        if tasks:
            await asyncio.wait(tasks)
        writer.close()


class Datagrams(asyncio.DatagramProtocol):
    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        asyncio.ensure_future(self.reply(data, addr))

    async def reply(self, data: bytes, addr: tuple[str, int]) -> None:
        reply = await self.upstream.answer(data)
        if reply is not None and self.transport is not None:
            self.transport.sendto(reply, addr)


async def serve(args: argparse.Namespace) -> None:
    upstream = Upstream(args.forward, args.broken_zone, args.delay)
    server = await asyncio.start_server(upstream.stream, args.addr, 53, reuse_address=True)
    loop = asyncio.get_running_loop()
    await loop.create_datagram_endpoint(lambda: Datagrams(upstream), local_addr=(args.addr, 53))
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser(prog="slowupstream")
    ap.add_argument("addr")
    ap.add_argument("forward")
    ap.add_argument("--broken-zone", required=True)
    ap.add_argument("--delay", type=float, default=0.4)
    asyncio.run(serve(ap.parse_args()))


if __name__ == "__main__":
    main()
