"""Hold N concurrent split flows through the gateway and report fds and userspace memory.

The overhead scenario's veth path (bench/vethlab.py: <prefix>ovh-client -- <prefix>ovh-gw, running
`perigee gateway run` -- <prefix>ovh-server, no emulator; prefix BENCH_PREFIX, default bn-). Client and
server are separate processes (each needs N fds). Run as root:
    .venv/bin/python -m bench.gateway.concurrent_flows [N] [WORKERS]
Prints one JSON line. Everything it creates is removed at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench import vethlab
from bench.lab import PREFIX
from perigee_control.client import GatewayClient

SERVER = r"""
import socket, select, sys
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", 5001)); l.listen(4096); l.setblocking(False)
ep = select.epoll(); ep.register(l.fileno(), select.EPOLLIN); conns = {}
print("ready", flush=True)
while True:
    for fd, ev in ep.poll(1):
        if fd == l.fileno():
            while True:
                try: c, _ = l.accept()
                except BlockingIOError: break
                c.setblocking(False); conns[c.fileno()] = c; ep.register(c.fileno(), select.EPOLLIN)
        else:
            c = conns[fd]
            try: d = c.recv(4096)
            except (ConnectionError, BlockingIOError): d = b""
            if d: c.send(d)
            else: ep.unregister(fd); c.close(); del conns[fd]
"""

CLIENT = r"""
import socket, sys, time
n, server = int(sys.argv[1]), sys.argv[2]; cs = []
t0 = time.time()
for i in range(n):
    c = socket.create_connection((server, 5001), timeout=10); cs.append(c)
for c in cs: c.sendall(b"x")
for c in cs: assert c.recv(1) == b"x"
print(f"{time.time() - t0:.2f}", flush=True)
sys.stdin.readline()
"""


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def hold(vp: vethlab.VethPath, control: GatewayClient, n: int, workers: int) -> dict[str, object]:
    """Open n flows from client to server through the running gateway, echo one byte on each, and measure
    the workers with the flows idle."""
    time.sleep(0.3)
    pids = [w.pid for w in control.health().workers]
    before = {p: (rss_kib(p), fds(p)) for p in pids}
    children: list[subprocess.Popen[str]] = []
    try:
        srv = subprocess.Popen(
            vp.exec_argv("server", [sys.executable, "-c", SERVER]), stdout=subprocess.PIPE, text=True
        )
        children.append(srv)
        assert srv.stdout is not None and srv.stdout.readline().strip() == "ready"
        cli = subprocess.Popen(
            vp.exec_argv("client", [sys.executable, "-c", CLIENT, str(n), vethlab.SERVER_V4]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        children.append(cli)
        assert cli.stdout is not None
        connect_s = float(cli.stdout.readline())
        time.sleep(1.5)
        counters = control.counters()
        after = {p: (rss_kib(p), fds(p)) for p in pids}
    finally:
        for p in reversed(children):
            p.kill()
            p.wait()
    grown = sum(after[p][0] - before[p][0] for p in pids)
    return {
        "flows": n,
        "workers": workers,
        "flows_live": counters.flows_live,
        "connect_all_s": connect_s,
        "worker_fds_max": max(a[1] for a in after.values()),
        "worker_rss_growth_kib": grown,
        "userspace_bytes_per_idle_flow": round(grown * 1024 / n),
    }


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    with vethlab.path(PREFIX) as vp, vethlab.gateway(vp, workers, max_flows=n) as gw:
        print(json.dumps(hold(vp, GatewayClient(gw.control_socket), n, workers)))


if __name__ == "__main__":
    main()
