"""`python -m bench.soak.load`: the soak's client load, run inside the client namespace.

Threads, each looping until the deadline: bulk downloads and uploads (the lab's bulk service,
port 5001), short HTTP fetches that bypass the cache (/nocache/bytes/N), cacheable fetches of a
few hot objects (hits after the first) and of fresh objects (misses), all through the gateway;
plus recovery probes: a new short TCP transfer and a new short HTTP fetch started every
--probe-every seconds. Every body is checked byte for byte against the lab's fixed stream
(satlab.content) and its sha256 against the stream's; uploads against the sha256 the server
reports. One JSON line per finished transfer goes to --out; the last stdout line is a summary.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import socket
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import IO, Any

from satlab.content import iter_stream, stream_bytes

BULK_PORT = 5001
HTTP_PORT = 80
RECV = 256 * 1024
PROBE_BYTES = 1000
HOT_SIZES = (150_000, 700_000, 2_000_000)  # cache hits after their first fetch


@dataclass
class Transfer:
    kind: str
    size: int
    t0: float
    t1: float = 0.0
    bytes: int = 0  # bytes received (down) or sent (up)
    complete: bool = False
    corrupted_bytes: int = 0
    sha256_ok: bool = False
    error: str = ""
    x_cache: str = ""


@dataclass
class Expected:
    """sha256 of the stream's first n bytes, computed once per size."""

    digests: dict[int, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def sha256(self, n: int) -> str:
        with self.lock:
            if n in self.digests:
                return self.digests[n]
        h = hashlib.sha256()
        for part in iter_stream(0, n):
            h.update(part)
        with self.lock:
            self.digests[n] = h.hexdigest()
        return self.digests[n]


def diff_count(got: bytes, want: bytes) -> int:
    if got == want:
        return 0
    return sum(1 for a, b in zip(got, want, strict=True) if a != b)


class BodyCheck:
    """Compares a body, as it arrives, with the stream's bytes from offset 0."""

    def __init__(self) -> None:
        self.h = hashlib.sha256()
        self.offset = 0
        self.corrupted = 0

    def feed(self, data: bytes) -> None:
        self.h.update(data)
        self.corrupted += diff_count(data, stream_bytes(self.offset, len(data)))
        self.offset += len(data)


def bulk_get(server: str, size: int, timeout: float, exp: Expected, kind: str = "bulk-down") -> Transfer:
    tr = Transfer(kind, size, time.monotonic())
    chk = BodyCheck()
    try:
        with socket.create_connection((server, BULK_PORT), timeout=timeout) as s:
            s.sendall(f"GET {size}\n".encode())
            while chk.offset < size:
                data = s.recv(min(RECV, size - chk.offset))
                if not data:
                    break
                chk.feed(data)
            if chk.offset == size and s.recv(1):
                tr.error = "more bytes than asked for"
                chk.corrupted += 1
    except OSError as e:
        tr.error = f"{type(e).__name__}: {e}"
    tr.t1, tr.bytes, tr.corrupted_bytes = time.monotonic(), chk.offset, chk.corrupted
    tr.complete = chk.offset == size and not tr.error
    tr.sha256_ok = tr.complete and chk.h.hexdigest() == exp.sha256(size)
    if tr.complete and not tr.sha256_ok:
        tr.corrupted_bytes = max(tr.corrupted_bytes, 1)
    return tr


def bulk_put(server: str, size: int, timeout: float, exp: Expected) -> Transfer:
    tr = Transfer("bulk-up", size, time.monotonic())
    try:
        with socket.create_connection((server, BULK_PORT), timeout=timeout) as s:
            s.sendall(f"PUT {size}\n".encode())
            for part in iter_stream(0, size):
                s.sendall(part)
                tr.bytes += len(part)
            # sendall returns once the bytes are in our own (LAN-sized) send buffer: the reply
            # comes after they crossed the satellite, at no less than 0.5 Mbit/s.
            s.settimeout(timeout + size * 8 / 0.5e6)
            buf = b""
            while not buf.endswith(b"\n"):
                data = s.recv(4096)
                if not data:
                    break
                buf += data
        reply: dict[str, Any] = json.loads(buf.decode()) if buf else {}
        if not reply:
            tr.error = "no reply from the sink"
        elif not reply.get("ok"):
            tr.error = str(reply.get("error", "sink refused"))
        else:
            tr.complete = int(reply.get("bytes", -1)) == size
            tr.sha256_ok = tr.complete and reply.get("sha256") == exp.sha256(size)
            if tr.complete and not tr.sha256_ok:
                tr.corrupted_bytes = size  # the sink saw other bytes; where, only it could tell
    except (OSError, ValueError) as e:
        tr.error = f"{type(e).__name__}: {e}"
    tr.t1 = time.monotonic()
    return tr


def http_get(server: str, path: str, size: int, timeout: float, exp: Expected, kind: str) -> Transfer:
    tr = Transfer(kind, size, time.monotonic())
    chk = BodyCheck()
    try:
        with socket.create_connection((server, HTTP_PORT), timeout=timeout) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: {server}\r\nConnection: close\r\n\r\n".encode())
            buf = b""
            while b"\r\n\r\n" not in buf:
                data = s.recv(65536)
                if not data:
                    raise ConnectionError("closed before the response head")
                buf += data
            head, _, body = buf.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split(" ", 2)[1])
            headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
            tr.x_cache = headers.get("x-cache", "")
            if status != 200:
                raise ConnectionError(f"HTTP {status}")
            length = int(headers.get("content-length", "-1"))
            if length != size:
                raise ConnectionError(f"Content-Length {length}, expected {size}")
            if body:
                chk.feed(body[:size])
            while chk.offset < size:
                data = s.recv(min(RECV, size - chk.offset))
                if not data:
                    break
                chk.feed(data)
    except (OSError, ValueError, IndexError) as e:
        tr.error = f"{type(e).__name__}: {e}"
    tr.t1, tr.bytes, tr.corrupted_bytes = time.monotonic(), chk.offset, chk.corrupted
    tr.complete = chk.offset == size and not tr.error
    tr.sha256_ok = tr.complete and chk.h.hexdigest() == exp.sha256(size)
    if tr.complete and not tr.sha256_ok:
        tr.corrupted_bytes = max(tr.corrupted_bytes, 1)
    return tr


class Recorder:
    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.verified = 0
        self.corrupted = 0

    def add(self, tr: Transfer) -> None:
        with self.lock:
            self.out.write(json.dumps(asdict(tr)) + "\n")
            self.out.flush()
            self.counts[tr.kind] = self.counts.get(tr.kind, 0) + 1
            self.corrupted += tr.corrupted_bytes
            if tr.sha256_ok:
                self.verified += tr.size


def running(stop_at: float, stop_file: str) -> bool:
    return time.monotonic() < stop_at and not (stop_file and os.path.exists(stop_file))


# What each load thread is doing now (kind, start), to name a hung flow.
CURRENT: dict[int, tuple[str, float]] = {}


def loop(stop_at: float, stop_file: str, rec: Recorder, job: Any, name: str) -> None:
    me = threading.get_ident()
    while running(stop_at, stop_file):
        CURRENT[me] = (name, time.monotonic())
        tr = job()
        rec.add(tr)
        if not tr.complete:
            time.sleep(0.2)  # refused or reset at once (a fault): do not spin
    CURRENT.pop(me, None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.soak.load")
    ap.add_argument("--server", default="10.71.3.10")
    ap.add_argument("--duration", type=float, required=True, help="at most this long")
    ap.add_argument("--stop-file", default="", help="stop starting transfers once this file exists")
    ap.add_argument("--out", required=True)
    ap.add_argument("--bulk-down", type=int, default=3, help="concurrent bulk downloads")
    ap.add_argument("--bulk-up", type=int, default=2, help="concurrent bulk uploads")
    ap.add_argument("--bulk-bytes", type=int, default=64 << 20)
    ap.add_argument("--web", type=int, default=4, help="concurrent short HTTP fetchers")
    ap.add_argument(
        "--stall-timeout",
        type=float,
        default=60.0,
        help="a transfer with no byte for this long is given up (counted as broken)",
    )
    ap.add_argument("--probe-every", type=float, default=0.1)
    ap.add_argument("--probe-timeout", type=float, default=3.0)
    a = ap.parse_args(argv)
    exp = Expected()
    rnd = random.Random(7)
    rlock = threading.Lock()
    stop_at = time.monotonic() + a.duration

    def fresh_size() -> int:
        with rlock:
            return rnd.randrange(20_000, 400_000)

    def web_job() -> Transfer:
        with rlock:
            pick = rnd.random()
        if pick < 0.4:
            n = fresh_size()
            return http_get(a.server, f"/nocache/bytes/{n}", n, a.stall_timeout, exp, "http-short")
        if pick < 0.75:
            with rlock:
                n = rnd.choice(HOT_SIZES)
            return http_get(a.server, f"/bytes/{n}", n, a.stall_timeout, exp, "http-cacheable-hot")
        n = fresh_size()
        return http_get(a.server, f"/bytes/{n}", n, a.stall_timeout, exp, "http-cacheable-fresh")

    with open(a.out, "w") as out:
        rec = Recorder(out)
        jobs: list[tuple[str, Any]] = (
            [
                (
                    "bulk-down",
                    lambda: bulk_get(a.server, a.bulk_bytes, a.stall_timeout, exp),
                )
            ]
            * a.bulk_down
            + [
                (
                    "bulk-up",
                    lambda: bulk_put(a.server, a.bulk_bytes, a.stall_timeout, exp),
                )
            ]
            * a.bulk_up
            + [("web", web_job)] * a.web
        )
        threads = [
            threading.Thread(target=loop, args=(stop_at, a.stop_file, rec, j, name), daemon=True) for name, j in jobs
        ]
        for t in threads:
            t.start()
        probes: list[threading.Thread] = []
        nxt = time.monotonic()
        while running(stop_at, a.stop_file):
            probes.append(
                threading.Thread(
                    target=lambda: rec.add(bulk_get(a.server, PROBE_BYTES, a.probe_timeout, exp, "probe-tcp")),
                    daemon=True,
                )
            )
            probes.append(
                threading.Thread(
                    target=lambda: rec.add(
                        http_get(
                            a.server,
                            f"/nocache/bytes/{PROBE_BYTES}",
                            PROBE_BYTES,
                            a.probe_timeout,
                            exp,
                            "probe-http",
                        )
                    ),
                    daemon=True,
                )
            )
            probes[-2].start()
            probes[-1].start()
            probes = [p for p in probes if p.is_alive()]
            nxt += a.probe_every
            time.sleep(max(0.0, nxt - time.monotonic()))
        # A transfer still running gets its stall timeout plus its own duration to end; one that
        # does not is a hung flow.
        # (at no less than 1 Mbit/s for a bulk transfer).
        grace_end = time.monotonic() + a.stall_timeout * 3 + a.bulk_bytes * 8 / 1e6
        hung = 0
        for t in threads + probes:
            t.join(max(0.0, grace_end - time.monotonic()))
            hung += t.is_alive()
        now = time.monotonic()
        alive = {t.ident for t in threads if t.is_alive()}
        hung_jobs = [
            {"job": kind, "running_s": round(now - t0, 1)}
            for ident, (kind, t0) in list(CURRENT.items())
            if ident in alive
        ]
        with rec.lock:
            summary = {
                "counts": rec.counts,
                "verified_bytes": rec.verified,
                "corrupted_bytes": rec.corrupted,
                "hung_client_flows": hung,
                "hung_jobs": hung_jobs,
            }
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
