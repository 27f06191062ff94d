"""One measured TCP transfer: `serve` sends N bytes to the first client with a chosen congestion
control and samples its own TCP_INFO; `fetch` connects, receives, and samples the byte count.

Both run inside namespaces (`ip netns exec NS python -m bench.tools.flow ...`) and print one JSON
object on stdout. Times are CLOCK_MONOTONIC, which all network namespaces share, so the orchestrator
can put the sender's cwnd series on the receiver's time axis.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from typing import Any

from bench.tools import tcpinfo

CHUNK = 1 << 20
SAMPLE_S = 0.1


class Sampler(threading.Thread):
    """Calls `probe` every SAMPLE_S seconds until stopped; keeps (t, value) pairs."""

    def __init__(self, probe: Any, period: float = SAMPLE_S) -> None:
        super().__init__(daemon=True)
        self.probe, self.period = probe, period
        self.samples: list[Any] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        next_t = time.monotonic()
        while not self.stopped.is_set():
            try:
                self.samples.append(self.probe(time.monotonic()))
            except OSError:
                return
            next_t += self.period
            self.stopped.wait(max(0.0, next_t - time.monotonic()))

    def stop(self) -> list[Any]:
        self.stopped.set()
        self.join(timeout=2)
        return self.samples


def serve(args: argparse.Namespace) -> dict[str, Any]:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcpinfo.set_congestion(listener, args.cc)  # inherited by the accepted socket
    listener.bind((args.bind, args.port))
    listener.listen(1)
    listener.settimeout(args.accept_timeout)
    print("LISTENING", flush=True)
    conn, peer = listener.accept()
    listener.close()
    t_accept = time.monotonic()
    tcpinfo.set_congestion(conn, args.cc)
    sampler = Sampler(lambda t: {"t": t, **tcpinfo.read(conn)})
    sampler.start()
    payload = bytes(CHUNK)
    remaining = args.bytes
    deadline = t_accept + args.timeout
    conn.settimeout(args.timeout)
    error = ""
    try:
        while remaining > 0 and time.monotonic() < deadline:
            sent = conn.send(memoryview(payload)[: min(CHUNK, remaining)])
            remaining -= sent
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(max(1.0, deadline - time.monotonic()))
        while conn.recv(4096):  # wait for the receiver to close: every byte acknowledged
            pass
    except OSError as exc:
        error = str(exc)
    t_done = time.monotonic()
    samples = sampler.stop()
    result = {
        "role": "serve",
        "cc": tcpinfo.congestion(conn),
        "cc_requested": args.cc,
        "peer": list(peer),
        "t_accept": t_accept,
        "t_done": t_done,
        "bytes_sent": args.bytes - remaining,
        "tcp_info": samples,
        "error": error,
    }
    conn.close()
    return result


def fetch(args: argparse.Namespace) -> dict[str, Any]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(args.timeout)
    total = 0
    sampler = Sampler(lambda t: (t, total))
    t_start = time.monotonic()
    error = ""
    try:
        sock.connect((args.connect, args.port))
        t_connected = time.monotonic()
        sampler.start()
        buf = bytearray(CHUNK)
        deadline = t_start + args.timeout
        sock.settimeout(0.5)  # wake up to honour the deadline even when the path stalls
        while total < args.bytes and time.monotonic() < deadline:
            try:
                n = sock.recv_into(buf)
            except TimeoutError:
                continue
            if n == 0:
                break
            total += n
    except OSError as exc:
        error = str(exc)
        t_connected = t_connected if "t_connected" in locals() else float("nan")
    t_done = time.monotonic()
    samples = sampler.stop() if sampler.is_alive() else []
    samples.append((t_done, total))
    sock.close()
    return {
        "role": "fetch",
        "t_start": t_start,
        "t_connected": t_connected,
        "t_done": t_done,
        "bytes": total,
        "samples": samples,
        "error": error,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.tools.flow")
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--bind", default="0.0.0.0")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--cc", default="cubic")
    s.add_argument("--bytes", type=int, required=True)
    s.add_argument("--timeout", type=float, default=120.0)
    s.add_argument("--accept-timeout", type=float, default=30.0)
    f = sub.add_parser("fetch")
    f.add_argument("--connect", required=True)
    f.add_argument("--port", type=int, required=True)
    f.add_argument("--bytes", type=int, required=True)
    f.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    try:
        result = serve(args) if args.cmd == "serve" else fetch(args)
    except OSError as exc:
        result = {"role": args.cmd, "error": str(exc)}
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0 if not result.get("error") else 1


if __name__ == "__main__":
    sys.exit(main())
