"""Idle-flow load, run inside namespaces (`ip netns exec NS python -m bench.tools.connload hold ...`).

The echo server and the connection-rate client are the Rust `perigee-loadgen` (bench.tools.gwload):
Python could not produce the 5,000 connections/s the splitter target needs.

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


class _Counter:
    def __init__(self) -> None:
        self.errors = 0
        self.kinds: dict[str, int] = {}

    def error(self, kind: str) -> None:
        self.errors += 1
        self.kinds[kind] = self.kinds.get(kind, 0) + 1


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
    h = sub.add_parser("hold")
    h.add_argument("--connect", required=True)
    h.add_argument("--port", type=int, required=True)
    h.add_argument("--flows", type=int, required=True)
    h.add_argument("--procs", type=int, default=4)
    h.add_argument("--in-flight", type=int, default=256)
    h.add_argument("--hold-s", type=float, default=60.0)
    args = parser.parse_args(argv)
    return hold(args)


if __name__ == "__main__":
    sys.exit(main())
