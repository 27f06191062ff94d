"""Connection load, run inside namespaces (`ip netns exec NS python -m bench.tools.connload ...`).

- `echo`: a 1-byte echo server, several processes on one SO_REUSEPORT port (each epoll loop).
- `rate`: new connections per second: each process keeps `--concurrency` connections in flight,
  each one connect → send 1 byte → receive the echo → close. A connection counts only when its
  echo came back, i.e. it reached the server (through a splitter: both legs existed).
- `hold`: open `--flows` connections over several processes (a process may hold only ~20,000
  fds), check each with one echo, print one JSON line, then keep them open and idle until
  SIGTERM or `--hold-s`.

Results are one JSON object per line on stdout. Times are CLOCK_MONOTONIC.
"""

from __future__ import annotations

import argparse
import errno
import json
import multiprocessing as mp
import select
import signal
import socket
import sys
import time
from typing import Any

BACKLOG = 4096
PAYLOAD = b"x"
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """A child process must not outlive the tool (an orphan would keep its sockets open)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def split_evenly(total: int, parts: int) -> list[int]:
    """`total` shared over `parts` as evenly as possible (the first ones get the remainder)."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def aggregate(results: list[dict[str, Any]], duration_s: float) -> dict[str, Any]:
    """Sum the per-process counters of a `rate` run; the rate counts echoes within the window."""
    done = sum(r["completed_in_window"] for r in results)
    out = {
        "processes": len(results),
        "completed": sum(r["completed"] for r in results),
        "completed_in_window": done,
        "errors": sum(r["errors"] for r in results),
        "unfinished": sum(r["unfinished"] for r in results),
        "duration_s": duration_s,
        "rate_per_s": done / duration_s if duration_s > 0 else 0.0,
    }
    kinds: dict[str, int] = {}
    for r in results:
        for kind, n in r.get("error_kinds", {}).items():
            kinds[kind] = kinds.get(kind, 0) + n
    out["error_kinds"] = kinds
    return out


# --- echo server ---------------------------------------------------------------------------


def _echo_loop(bind: str, port: int) -> None:
    _die_with_parent()
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    lst.bind((bind, port))
    lst.listen(BACKLOG)
    lst.setblocking(False)
    ep = select.epoll()
    ep.register(lst.fileno(), select.EPOLLIN)
    conns: dict[int, socket.socket] = {}
    while True:
        for fd, _ in ep.poll(1):
            if fd == lst.fileno():
                while True:
                    try:
                        c, _ = lst.accept()
                    except (BlockingIOError, ConnectionAbortedError):
                        break
                    except OSError as exc:  # EMFILE: leave the rest in the backlog
                        if exc.errno == errno.EMFILE:
                            break
                        raise
                    c.setblocking(False)
                    conns[c.fileno()] = c
                    ep.register(c.fileno(), select.EPOLLIN)
                continue
            c = conns[fd]
            try:
                data = c.recv(4096)
                if data:
                    c.send(data)
                    continue
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                pass
            ep.unregister(fd)
            del conns[fd]
            c.close()


def echo(args: argparse.Namespace) -> int:
    children = []
    for _ in range(args.procs):
        p = mp.Process(target=_echo_loop, args=(args.bind, args.port), daemon=True)
        p.start()
        children.append(p)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    time.sleep(0.3)  # every process has bound before we say so
    if not all(p.is_alive() for p in children):
        print(json.dumps({"error": "an echo process died at start"}), flush=True)
        return 1
    print("LISTENING", flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    for p in children:
        p.terminate()
    return 0


# --- connection rate -----------------------------------------------------------------------


class _Counter:
    def __init__(self) -> None:
        self.completed = self.in_window = self.errors = 0
        self.kinds: dict[str, int] = {}

    def error(self, kind: str) -> None:
        self.errors += 1
        self.kinds[kind] = self.kinds.get(kind, 0) + 1


def _rate_loop(
    host: str,
    port: int,
    concurrency: int,
    t_start: float,
    duration: float,
    max_conns: int,
    out: Any,
) -> None:
    _die_with_parent()
    ep = select.epoll()
    live: dict[int, tuple[socket.socket, bool]] = {}  # fd -> (socket, echo requested)
    count = _Counter()
    started = 0
    t_stop = t_start + duration
    drain_until = t_stop + 2.0

    def open_one() -> None:
        nonlocal started
        started += 1
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        err = s.connect_ex((host, port))
        if err not in (0, errno.EINPROGRESS):
            count.error(errno.errorcode.get(err, str(err)))
            s.close()
            return
        live[s.fileno()] = (s, False)
        ep.register(s.fileno(), select.EPOLLOUT)

    def finish(fd: int) -> None:
        s, _ = live.pop(fd)
        ep.unregister(fd)
        s.close()
        now = time.monotonic()
        if now < t_stop and started < max_conns:
            open_one()

    while time.monotonic() < t_start:
        time.sleep(0.001)
    for _ in range(concurrency):
        open_one()
    while live and time.monotonic() < drain_until:
        for fd, _ in ep.poll(0.1):
            if fd not in live:
                continue
            s, requested = live[fd]
            if not requested:
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    count.error(errno.errorcode.get(err, str(err)))
                    finish(fd)
                    continue
                try:
                    s.send(PAYLOAD)
                except OSError as exc:
                    count.error(errno.errorcode.get(exc.errno or 0, "send"))
                    finish(fd)
                    continue
                live[fd] = (s, True)
                ep.modify(fd, select.EPOLLIN)
                continue
            try:
                data = s.recv(16)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as exc:
                count.error(errno.errorcode.get(exc.errno or 0, "recv"))
                finish(fd)
                continue
            if data == PAYLOAD:
                count.completed += 1
                if time.monotonic() <= t_stop:
                    count.in_window += 1
            else:
                count.error("eof" if not data else "bad_echo")
            finish(fd)
    out.put(
        {
            "completed": count.completed,
            "completed_in_window": count.in_window,
            "errors": count.errors,
            "error_kinds": count.kinds,
            "unfinished": len(live),
        }
    )


def rate(args: argparse.Namespace) -> dict[str, Any]:
    queue: Any = mp.Queue()
    t_start = time.monotonic() + 0.3  # every process starts at once
    per_proc = split_evenly(args.max_conns, args.procs)
    children = [
        mp.Process(
            target=_rate_loop,
            args=(
                args.connect,
                args.port,
                args.concurrency,
                t_start,
                args.duration,
                per_proc[i],
                queue,
            ),
        )
        for i in range(args.procs)
    ]
    for p in children:
        p.start()
    results = [queue.get(timeout=args.duration + 30) for _ in children]
    for p in children:
        p.join(timeout=5)
    return aggregate(results, args.duration)


# --- hold many idle flows ------------------------------------------------------------------


def _hold_loop(host: str, port: int, n: int, in_flight: int, conn: Any) -> None:
    _die_with_parent()
    ep = select.epoll()
    pending: dict[int, tuple[socket.socket, bool]] = {}
    held: list[socket.socket] = []
    count = _Counter()
    opened = 0
    deadline = time.monotonic() + 60

    def open_one() -> None:
        nonlocal opened
        opened += 1
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        err = s.connect_ex((host, port))
        if err not in (0, errno.EINPROGRESS):
            count.error(errno.errorcode.get(err, str(err)))
            s.close()
            return
        pending[s.fileno()] = (s, False)
        ep.register(s.fileno(), select.EPOLLOUT)

    def done(fd: int, ok: bool) -> None:
        s, _ = pending.pop(fd)
        ep.unregister(fd)
        if ok:
            held.append(s)
        else:
            s.close()
        if opened < n:
            open_one()

    for _ in range(min(in_flight, n)):
        open_one()
    while pending and time.monotonic() < deadline:
        for fd, _ in ep.poll(0.1):
            if fd not in pending:
                continue
            s, requested = pending[fd]
            if not requested:
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    count.error(errno.errorcode.get(err, str(err)))
                    done(fd, False)
                    continue
                try:
                    s.send(PAYLOAD)
                except OSError as exc:
                    count.error(errno.errorcode.get(exc.errno or 0, "send"))
                    done(fd, False)
                    continue
                pending[fd] = (s, True)
                ep.modify(fd, select.EPOLLIN)
                continue
            try:
                data = s.recv(16)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as exc:
                count.error(errno.errorcode.get(exc.errno or 0, "recv"))
                done(fd, False)
                continue
            ok = data == PAYLOAD
            if not ok:
                count.error("eof" if not data else "bad_echo")
            done(fd, ok)
    conn.send(
        {
            "held": len(held),
            "errors": count.errors,
            "error_kinds": count.kinds,
            "unfinished": len(pending),
        }
    )
    conn.recv()  # hold until the parent says stop (or dies: EOFError)
    for s in held:
        s.close()


def hold(args: argparse.Namespace) -> int:
    t0 = time.monotonic()
    pipes, children = [], []
    for n in split_evenly(args.flows, args.procs):
        parent_end, child_end = mp.Pipe()
        p = mp.Process(
            target=_hold_loop,
            args=(args.connect, args.port, n, args.in_flight, child_end),
            daemon=True,
        )
        p.start()
        pipes.append(parent_end)
        children.append(p)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    parts = [pipe.recv() for pipe in pipes]
    summary: dict[str, Any] = {
        "flows_requested": args.flows,
        "processes": args.procs,
        "held": sum(p["held"] for p in parts),
        "errors": sum(p["errors"] for p in parts),
        "unfinished": sum(p["unfinished"] for p in parts),
        "error_kinds": {},
        "open_all_s": time.monotonic() - t0,
    }
    for part in parts:
        for kind, k in part["error_kinds"].items():
            summary["error_kinds"][kind] = summary["error_kinds"].get(kind, 0) + k
    print(json.dumps(summary), flush=True)
    signal.sigtimedwait({signal.SIGTERM, signal.SIGINT}, args.hold_s)
    for pipe in pipes:
        pipe.send("stop")
    for p in children:
        p.join(timeout=5)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.tools.connload")
    sub = parser.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("echo")
    e.add_argument("--bind", default="0.0.0.0")
    e.add_argument("--port", type=int, required=True)
    e.add_argument("--procs", type=int, default=2)
    r = sub.add_parser("rate")
    r.add_argument("--connect", required=True)
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--procs", type=int, default=2)
    r.add_argument("--concurrency", type=int, default=64)
    r.add_argument("--duration", type=float, default=5.0)
    r.add_argument(
        "--max-conns",
        type=int,
        default=40_000,
        help="cap (client ports: every closed connection sits in TIME_WAIT)",
    )
    h = sub.add_parser("hold")
    h.add_argument("--connect", required=True)
    h.add_argument("--port", type=int, required=True)
    h.add_argument("--flows", type=int, required=True)
    h.add_argument("--procs", type=int, default=4)
    h.add_argument("--in-flight", type=int, default=256)
    h.add_argument("--hold-s", type=float, default=60.0)
    args = parser.parse_args(argv)
    if args.cmd == "echo":
        return echo(args)
    if args.cmd == "hold":
        return hold(args)
    result = rate(args)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
