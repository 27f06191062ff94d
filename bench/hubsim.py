"""Simulated terminals of the peer path for the `hub-scale` benchmark: one process, many terminals.

`python -m bench.hubsim SPEC.json`, inside a namespace that reaches the hub gateways' peer listeners. Each
terminal of the spec has its own identity (a PEM with its certificate and key, enrolled at the hub), its own
client prefix and its own source address. Like a terminal's daemon (docs/splitter.md, *The pool*; docs/cluster.md,
*The peer path through the cluster*) it keeps `pool` ready connections to every hub gateway (TCP, TLS 1.3 with ALPN
`perigee-peer/2`, the gateway's key pinned by its SPKI sha256, then READY), refills a pool as flows take its
connections, backs a failing gateway's pool off (1 s doubling to 15 s, then one probe), keeps a long poll for the
cluster table (OPEN kind 3, the epoch it holds; `polls`: "terminal" one per terminal, "process" one for all,
"none") and aims each flow at the gateway of its bucket (satlab.cluster.bucket). A flow with no ready connection to
its gateway is recorded `no_conn` (a real terminal sends it the direct way, which this one cannot).

Commands on stdin, one JSON object a line; answers on stdout, one JSON object a line:
  {"cmd": "status"}                                  -> {"event": "status", ...}
  {"cmd": "fetch", "flows": N, "size": B, "interval": S}   -> {"event": "fetch", "flows": [...]}
  {"cmd": "probe", "duration": D, "size": B, "interval": S} -> {"event": "probe", "flows": [...]}
  {"cmd": "stop"}
It prints {"event": "loaded"} and starts on the first line it reads ({"cmd": "go"}: every process at once).
When every pool's first fill has ended (full, or failed once) it prints {"event": "setup", ...} by itself.
Flow records: t_start, t_status, t_first, t_end (time.time()), gw, term, result (ok, no_conn, refused, failed,
lost: the connection ended before STATUS, reset: after it, stalled, short).
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import hashlib
import json
import random
import resource
import ssl
import struct
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from satlab.cluster import bucket

ALPN = "perigee-peer/2"
READY = b"PGPR\x02\x00\x00\x00"
OPEN_TABLE = b"PGPO\x03" + bytes(39)
CONNECT_TIMEOUT_S = 15.0
STALL_S = 20.0
BACKOFF_MAX_S = 15.0
POLL_RETRY_S = (0.0, 0.2, 0.5, 1.0, 2.0, 5.0)


# asyncio's TLS transport gives every connection a read buffer of SSLProtocol.max_size (256 KiB): 1.5 GiB for a
# process of 6,000 idle connections. A smaller one only means more read calls for a large answer.
if hasattr(asyncio.sslproto.SSLProtocol, "max_size"):
    asyncio.sslproto.SSLProtocol.max_size = 32 * 1024


def open_flow(client: str, cport: int, server: str, sport: int) -> bytes:
    """OPEN kind 1 (a client's flow), IPv4 mapped into the 16-byte fields."""
    return b"PGPO" + struct.pack("!BBHHBB", 1, 0, cport, sport, 4, 0) + mapped(client) + mapped(server)


def mapped(ip: str) -> bytes:
    return bytes(10) + b"\xff\xff" + bytes(int(x) for x in ip.split("."))


def fingerprint(cert_der: bytes) -> str:
    key = x509.load_der_x509_certificate(cert_der).public_key()
    spki = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


@dataclass
class Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    gw: str
    watch: asyncio.Task[None] | None = None


@dataclass
class Terminal:
    index: int
    name: str
    ctx: ssl.SSLContext
    client: str
    source: str
    pools: dict[str, list[Conn]] = field(default_factory=dict)
    wake: dict[str, asyncio.Event] = field(default_factory=dict)


class Sim:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.gws: dict[str, str] = dict(spec["gateways"])
        self.port = int(spec.get("port", 7072))
        self.pool = int(spec["pool"])
        self.server, self.server_port = str(spec["server"]), int(spec["server_port"])
        self.pins = set(spec.get("hub_fingerprints") or [])
        self.table: dict[str, Any] = spec["table"]
        self.sem = asyncio.Semaphore(int(spec.get("concurrency", 128)))
        self.running = True
        self.ready_at: list[float] = []  # when each connection of the first fill became ready (time.time())
        self.handshake_s: list[float] = []
        self.setup_failed = 0
        self.errors: dict[str, int] = {}
        self.lost: dict[str, list[float]] = {g: [] for g in self.gws}
        self.first_done = 0
        self.table_updates: list[dict[str, Any]] = []
        self.terms = [self._terminal(i, t) for i, t in enumerate(spec["terminals"])]
        self.t0 = time.time()  # set again when the first fill starts

    def _terminal(self, i: int, t: dict[str, Any]) -> Terminal:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # the hub's key is pinned below, as the gateways do
        ctx.load_cert_chain(t["pem"])
        ctx.set_alpn_protocols([ALPN])
        term = Terminal(int(t.get("index", i)), t["name"], ctx, t["client"], t["source"])
        for g in self.gws:
            term.pools[g] = []
            term.wake[g] = asyncio.Event()
        return term

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1

    # --- pools -------------------------------------------------------------------------------------------

    async def connect(self, term: Terminal, gw: str) -> Conn | None:
        async with self.sem:
            t = time.monotonic()
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(
                        self.gws[gw], self.port, ssl=term.ctx, server_hostname="", local_addr=(term.source, 0)
                    ),
                    CONNECT_TIMEOUT_S,
                )
            except (OSError, ssl.SSLError, TimeoutError) as e:
                self.error(type(e).__name__)
                return None
            try:
                obj = writer.get_extra_info("ssl_object")
                der = obj.getpeercert(binary_form=True) if obj else None
                if self.pins and (der is None or fingerprint(der) not in self.pins):
                    self.error("pin")
                    writer.transport.abort()
                    return None
                if await asyncio.wait_for(reader.readexactly(8), CONNECT_TIMEOUT_S) != READY:
                    self.error("not_ready")
                    writer.transport.abort()
                    return None
            except (OSError, ssl.SSLError, asyncio.IncompleteReadError, TimeoutError) as e:
                self.error(type(e).__name__)
                writer.transport.abort()
                return None
            self.handshake_s.append(time.monotonic() - t)
            return Conn(reader, writer, gw)

    def add_idle(self, term: Terminal, c: Conn) -> None:
        term.pools[c.gw].append(c)
        c.watch = asyncio.create_task(self.watch(term, c))

    async def watch(self, term: Terminal, c: Conn) -> None:
        """An idle connection the hub ends (its daemon died, a reset) leaves the pool."""
        try:
            await c.reader.read(1)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 (any way it ended)
            pass
        if c in term.pools[c.gw]:
            term.pools[c.gw].remove(c)
            self.lost[c.gw].append(time.time())
            term.wake[c.gw].set()
        c.writer.transport.abort()

    def take(self, term: Terminal, gw: str) -> Conn | None:
        pool = term.pools.get(gw) or []
        while pool:
            c = pool.pop()
            if c.watch is not None and c.watch.done():
                continue
            if c.watch is not None:
                c.watch.cancel()
            term.wake[gw].set()
            return c
        return None

    async def keeper(self, term: Terminal, gw: str) -> None:
        backoff, healthy, first = 1.0, True, True
        while self.running:
            need = self.pool - len(term.pools[gw])
            if need <= 0:
                if first:
                    first = False
                    self.first_done += 1
                term.wake[gw].clear()
                await term.wake[gw].wait()
                continue
            got = await asyncio.gather(*(self.connect(term, gw) for _ in range(need if healthy else 1)))
            ok = [c for c in got if c is not None]
            for c in ok:
                self.add_idle(term, c)
                if first:
                    self.ready_at.append(time.time())
            if len(ok) < len(got):
                if first:
                    self.setup_failed += len(got) - len(ok)
                    first = False
                    self.first_done += 1
                healthy = False
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
            else:
                backoff, healthy = 1.0, True

    # --- the cluster table -------------------------------------------------------------------------------

    async def poll_loop(self, term: Terminal) -> None:
        failures = 0
        names = list(self.gws)
        while self.running:
            order = names[term.index % len(names) :] + names[: term.index % len(names)]
            c = next((x for x in (self.take(term, g) for g in order) if x is not None), None)
            ok = False
            if c is not None:
                ok = await self.poll_once(c)
            failures = 0 if ok else failures + 1
            if failures:
                await asyncio.sleep(POLL_RETRY_S[min(failures - 1, len(POLL_RETRY_S) - 1)])

    async def poll_once(self, c: Conn) -> bool:
        started = time.monotonic()
        try:
            c.writer.write(OPEN_TABLE + f"{self.table.get('epoch', 0)}\n".encode())
            status = await asyncio.wait_for(c.reader.readexactly(8), 20)
            if status[:4] != b"PGPS" or status[4] != 0:
                return False
            body = await asyncio.wait_for(c.reader.read(-1), 65)
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError, TimeoutError):
            return False
        finally:
            c.writer.transport.abort()
        if not body:
            return time.monotonic() - started >= 5
        try:
            t = json.loads(body)
        except ValueError:
            return False
        if int(t.get("epoch", 0)) > int(self.table.get("epoch", 0)) and bucket.agrees(t):
            self.table = t
            self.table_updates.append(
                {"t": time.time(), "epoch": t["epoch"], "via": c.gw, "members": sorted({m for m in t["buckets"] if m})}
            )
        return True

    # --- flows -------------------------------------------------------------------------------------------

    async def flow(self, term: Terminal, size: int) -> dict[str, Any]:
        cport = random.randint(20000, 60999)
        gw = bucket.owner(self.table, term.client, cport, self.server, self.server_port) or ""
        rec: dict[str, Any] = {
            "t_start": time.time(),
            "gw": gw,
            "term": term.name,
            "client": term.client,
            "cport": cport,
        }
        c = self.take(term, gw)
        if c is None:
            return {**rec, "result": "no_conn"}
        got, result = 0, "ok"
        try:
            c.writer.write(open_flow(term.client, cport, self.server, self.server_port) + f"GET {size}\n".encode())
            try:
                status = await asyncio.wait_for(c.reader.readexactly(8), STALL_S)
            except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
                return {**rec, "result": "lost", "t_end": time.time()}
            rec["t_status"] = time.time()
            if status[:4] != b"PGPS" or status[4] != 0:
                return {
                    **rec,
                    "result": "refused" if status[4] == 2 else "failed",
                    "errno": struct.unpack("!H", status[6:8])[0],
                    "t_end": time.time(),
                }
            while got < size:
                data = await asyncio.wait_for(c.reader.read(262144), STALL_S)
                if not data:
                    result = "short"
                    break
                if not got:
                    rec["t_first"] = time.time()
                got += len(data)
        except TimeoutError:
            result = "stalled"
        except (OSError, ssl.SSLError):
            result = "reset"
        finally:
            c.writer.transport.abort()
        return {**rec, "result": result, "bytes": got, "t_end": time.time()}

    async def flows(self, n: int | None, duration: float | None, size: int, interval: float) -> list[dict[str, Any]]:
        tasks: list[asyncio.Task[dict[str, Any]]] = []
        end = time.monotonic() + (duration or 0)
        k = random.randrange(len(self.terms))
        while (n is not None and len(tasks) < n) or (duration is not None and time.monotonic() < end):
            tasks.append(asyncio.create_task(self.flow(self.terms[k % len(self.terms)], size)))
            k += 1
            if interval > 0:
                await asyncio.sleep(interval)
        return list(await asyncio.gather(*tasks))

    def status(self) -> dict[str, Any]:
        ready = {g: sum(len(t.pools[g]) for t in self.terms) for g in self.gws}
        return {
            "event": "status",
            "t": time.time(),
            "terminals": len(self.terms),
            "ready": ready,
            "lost": {g: len(v) for g, v in self.lost.items()},
            "lost_at": self.lost,
            "errors": self.errors,
            "epoch": self.table.get("epoch"),
            "table_updates": self.table_updates,
        }


async def commands(sim: Sim) -> None:
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        cmd = json.loads(line)
        what = cmd.get("cmd")
        if what == "stop":
            return
        if what == "status":
            emit(sim.status())
        elif what in ("fetch", "probe"):
            recs = await sim.flows(
                cmd.get("flows") if what == "fetch" else None,
                cmd.get("duration") if what == "probe" else None,
                int(cmd.get("size", 1024)),
                float(cmd.get("interval", 0.0)),
            )
            emit({"event": what, "flows": recs})


async def setup_report(sim: Sim) -> None:
    want = len(sim.terms) * len(sim.gws)
    while sim.first_done < want:
        await asyncio.sleep(0.05)
    emit(
        {
            "event": "setup",
            "t0": sim.t0,
            "ready_at": sim.ready_at,
            "handshake_s": sim.handshake_s,
            "failed": sim.setup_failed,
            "errors": sim.errors,
            "connections": len(sim.ready_at),
        }
    )


async def main_async(spec: dict[str, Any]) -> None:
    sim = Sim(spec)
    emit({"event": "loaded", "terminals": len(sim.terms)})
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)  # {"cmd": "go"}: all start at once
    sim.t0 = time.time()
    tasks = [asyncio.create_task(sim.keeper(t, g)) for t in sim.terms for g in sim.gws]
    polls = spec.get("polls", "terminal")
    pollers = sim.terms if polls == "terminal" else sim.terms[:1] if polls == "process" else []
    reporter = asyncio.create_task(setup_report(sim))
    await reporter
    tasks += [asyncio.create_task(sim.poll_loop(t)) for t in pollers]
    await commands(sim)
    sim.running = False
    for t in tasks:
        t.cancel()
    for term in sim.terms:
        for pool in term.pools.values():
            for c in pool:
                c.writer.transport.abort()
    emit({"event": "stopped"})


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    with open(args[0]) as f:
        spec = json.load(f)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    asyncio.run(main_async(spec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
