"""Hold N concurrent split flows through the gateway and report fds and userspace memory.

pt-bcf-c (client) -- pt-bcf-g (gateway, `perigee gateway run`) -- pt-bcf-s (server), veth, no
emulator. Client and server are separate processes (each needs N fds). Run as root:
    .venv/bin/python -m bench.gateway.concurrent_flows [N] [WORKERS]
Prints one JSON line. Everything it creates is removed at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perigee_control.client import GatewayClient, GatewayError

ROOT = Path(__file__).resolve().parents[2]
EXE = ROOT / "gateway" / "target" / "release" / "perigee"
C, G, S = "pt-bcf-c", "pt-bcf-g", "pt-bcf-s"


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


def topo_up() -> None:
    topo_down()
    for n in (C, G, S):
        sh("ip", "netns", "add", n)
        sh("ip", "-n", n, "link", "set", "lo", "up")
    sh("ip", "link", "add", "c0", "netns", C, "type", "veth", "peer", "name", "lan0", "netns", G)
    sh("ip", "link", "add", "s0", "netns", S, "type", "veth", "peer", "name", "sat0", "netns", G)
    for ns, dev, a in (
        (C, "c0", "10.98.1.10/24"),
        (G, "lan0", "10.98.1.1/24"),
        (G, "sat0", "10.98.2.1/24"),
        (S, "s0", "10.98.2.10/24"),
    ):
        sh("ip", "-n", ns, "addr", "add", a, "dev", dev)
        sh("ip", "-n", ns, "link", "set", dev, "up")
    sh("ip", "-n", C, "route", "add", "default", "via", "10.98.1.1")
    sh("ip", "-n", S, "route", "add", "default", "via", "10.98.2.1")
    sh("ip", "netns", "exec", G, "sysctl", "-qw", "net.ipv4.ip_forward=1")
    # The client needs many source ports for N connections to one server port.
    sh("ip", "netns", "exec", C, "sysctl", "-qw", "net.ipv4.ip_local_port_range=10000 65000")


def topo_down() -> None:
    for n in (C, G, S):
        subprocess.run(["ip", "netns", "del", n], capture_output=True)


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
n = int(sys.argv[1]); cs = []
t0 = time.time()
for i in range(n):
    c = socket.create_connection(("10.98.2.10", 5001), timeout=10); cs.append(c)
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


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    tmp = tempfile.mkdtemp(prefix="pt-bcf-")
    cfg = {
        "schema": 1,
        "role": "terminal",
        "interfaces": {"lan": ["lan0"], "satellite": "sat0"},
        "served_subnets": ["10.98.1.0/24"],
        "satellite": {"congestion_control": "cubic", "sndbuf_bytes": 0, "rcvbuf_bytes": 0},
    }
    Path(tmp, "gw.json").write_text(json.dumps(cfg))
    sock = f"{tmp}/gw.sock"
    control = GatewayClient(sock)
    procs: list[subprocess.Popen[str]] = []
    try:
        topo_up()
        gw = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                G,
                str(EXE),
                "gateway",
                "run",
                "--config",
                f"{tmp}/gw.json",
                "--control-socket",
                sock,
                "--workers",
                str(workers),
                "--metrics",
                "off",
            ],
            stderr=subprocess.DEVNULL,
            text=True,
        )
        procs.append(gw)
        for _ in range(100):
            try:
                if all(w.alive for w in control.health().workers):
                    break
            except GatewayError:
                pass  # not listening yet
            time.sleep(0.05)
        time.sleep(0.3)
        pids = [w.pid for w in control.health().workers]
        before = {p: (rss_kib(p), fds(p)) for p in pids}
        srv = subprocess.Popen(
            ["ip", "netns", "exec", S, sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True
        )
        procs.append(srv)
        assert srv.stdout is not None and srv.stdout.readline().strip() == "ready"
        cli = subprocess.Popen(
            ["ip", "netns", "exec", C, sys.executable, "-c", CLIENT, str(n)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        procs.append(cli)
        assert cli.stdout is not None
        connect_s = float(cli.stdout.readline())
        time.sleep(1.5)
        counters = control.counters()
        after = {p: (rss_kib(p), fds(p)) for p in pids}
        grown = sum(after[p][0] - before[p][0] for p in pids)
        print(
            json.dumps(
                {
                    "flows": n,
                    "workers": workers,
                    "flows_live": counters.flows_live,
                    "connect_all_s": connect_s,
                    "worker_fds_max": max(a[1] for a in after.values()),
                    "worker_rss_growth_kib": grown,
                    "userspace_bytes_per_idle_flow": round(grown * 1024 / n),
                }
            )
        )
    finally:
        for p in reversed(procs):
            p.kill()
            p.wait()
        topo_down()


if __name__ == "__main__":
    main()
