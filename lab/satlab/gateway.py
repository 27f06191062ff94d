"""satlab's `--gateway` hook: run Perigee's splitter daemon in the hub and/or terminal namespace.

`start(topo, where)` writes a default config per gateway (accelerate everything from the client
LAN, IPsec bypass on, satellite routes per DEVELOPERS.md addressing), starts
`bin/perigee gateway run` inside the namespace in the background with a pidfile, and waits until
`/v1/health` answers on `<run_dir>/gw-<ns>.sock`. `stop(topo[, where])` stops what start started.

The Squid cache is off by default; `start(..., cache=True)` or `SATLAB_GATEWAY_CACHE=1` in the
environment (e.g. `SATLAB_GATEWAY_CACHE=1 satlab up --gateway terminal`) enables it with a small
store (CACHE_CONFIG). Each gateway's Squid keeps its files under `<run_dir>/squid-<ns>/` and uses
the service name `perigee<ns without - and _>`, so gateways in several namespaces never share them.

Only `topo.ns(role)` and `topo.path(name)` of satlab's Topology are used (see the Protocol below).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Protocol

REPO = Path(__file__).resolve().parents[2]
PERIGEE = str(REPO / "bin" / "perigee")
WHERE = {"hub": ("hub",), "terminal": ("terminal",), "both": ("terminal", "hub")}
CLIENT_SUBNETS = ["10.71.1.0/24", "fd71:1::/64"]
IPSEC_BYPASS = [
    {"name": "ipsec-esp", "builtin": True, "protocol": "esp"},
    {"name": "ipsec-ah", "builtin": True, "protocol": "ah"},
    {"name": "ike", "builtin": True, "protocol": "udp", "ports": ["500"]},
    {"name": "nat-t", "builtin": True, "protocol": "udp", "ports": ["4500"]},
    {"name": "ike-tcp", "builtin": True, "protocol": "tcp", "ports": ["4500"]},
]
# Satellite routes: the far side of the satellite link, as seen from each gateway.
SAT_ROUTES = {
    "terminal": [
        {"dst": "10.71.3.0/24", "via": "10.71.2.2"},
        {"dst": "fd71:3::/64", "via": "fd71:2::2"},
        {"dst": "10.71.4.0/24", "via": "10.71.2.2"},
        {"dst": "fd71:4::/64", "via": "fd71:2::2"},
    ],
    "hub": [
        {"dst": "10.71.1.0/24", "via": "10.71.2.1"},
        {"dst": "fd71:1::/64", "via": "fd71:2::1"},
    ],
}


# The cache when enabled: small memory/disk budgets (the store lives in the run dir, on tmpfs).
CACHE_CONFIG: dict[str, Any] = {"enabled": True, "port": 3129, "admin_port": 3130, "memory_mb": 64,
                                "disk_mb": 256, "store": "rock", "max_object_mb": 200,
                                "max_memory_object_mb": 8}
CACHE_ENV = "SATLAB_GATEWAY_CACHE"


def cache_from_env() -> bool:
    return os.environ.get(CACHE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


class GatewayError(RuntimeError):
    pass


class TopologyLike(Protocol):
    """The part of satlab's Topology this hook needs."""

    def ns(self, role: str) -> str: ...

    def path(self, name: str) -> str: ...


def default_config(role: str, cache: bool = False) -> dict[str, Any]:
    return {
        "schema": 1,
        "revision": f"satlab-{role}",
        "role": role,
        "interfaces": {"lan": ["lan0"], "satellite": "sat0"},
        "served_subnets": CLIENT_SUBNETS,
        "splitter": {"enabled": True, "tproxy_port": 7071, "max_flows": 10000, "connect_timeout_ms": 10000,
                     "idle_timeout_s": 600, "relay_buffer_bytes": 262144},
        "satellite": {"congestion_control": "hybla", "sndbuf_bytes": 4194304, "rcvbuf_bytes": 4194304,
                      "pacing_rate_bps": 0, "initcwnd": 10, "initrwnd": 10, "routes": SAT_ROUTES[role]},
        "hybla": {"rtt0_ms": 25, "base_rtt_ms": 0},
        "classes": [],
        "bypass": IPSEC_BYPASS,
        "cache": dict(CACHE_CONFIG) if cache else {"enabled": False, "port": 3129},
        "sysctls": {"net.ipv4.tcp_slow_start_after_idle": "0"},
    }


def socket_path(topo: TopologyLike, role: str) -> str:
    return topo.path(f"gw-{topo.ns(role)}.sock")


def _files(topo: TopologyLike, role: str) -> tuple[str, str, str]:
    ns = topo.ns(role)
    return topo.path(f"gw-{ns}.json"), topo.path(f"gw-{ns}.pid"), topo.path(f"gw-{ns}.log")


def request(sock_path: str, method: str, path: str, body: Any = None, timeout: float = 5.0) -> tuple[int, Any]:
    """One HTTP/1.1 request on the gateway's control socket."""
    payload = b"" if body is None else json.dumps(body).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(sock_path)
        head = (f"{method} {path} HTTP/1.1\r\nHost: perigee\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n")
        s.sendall(head.encode() + payload)
        chunks = []
        while True:
            data = s.recv(65536)
            if not data:
                break
            chunks.append(data)
    raw = b"".join(chunks)
    head_b, _, body_b = raw.partition(b"\r\n\r\n")
    status = int(head_b.split(b" ", 2)[1])
    return status, json.loads(body_b) if body_b else None


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _read_pid(pidfile: str) -> int | None:
    try:
        return int(Path(pidfile).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def squid_service(topo: TopologyLike, role: str) -> str:
    """Squid's -n name: alphanumeric only (Squid refuses anything else)."""
    return "perigee" + "".join(c for c in topo.ns(role) if c.isalnum())


def squid_dir(topo: TopologyLike, role: str) -> str:
    return topo.path(f"squid-{topo.ns(role)}")


def _start_one(topo: TopologyLike, role: str, timeout: float, cache: bool) -> None:
    cfg_path, pidfile, logfile = _files(topo, role)
    sock = socket_path(topo, role)
    Path(cfg_path).write_text(json.dumps(default_config(role, cache), indent=2))
    sq = squid_dir(topo, role)
    # nsenter --net, not `ip netns exec`: the latter remounts /sys, which hides /sys/fs/bpf and with
    # it the pins of the BPF Hybla loaded on the host (every hybla parameter change would fail).
    argv = ["nsenter", f"--net=/run/netns/{topo.ns(role)}", "--", PERIGEE, "gateway", "run", "--config", cfg_path,
            "--control-socket", sock, "--squid-state-dir", sq, "--squid-run-dir", os.path.join(sq, "run"),
            "--squid-service", squid_service(topo, role)]
    with open(logfile, "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    Path(pidfile).write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            tail = Path(logfile).read_text(errors="replace")[-800:]
            raise GatewayError(f"perigee gateway in {topo.ns(role)} exited ({proc.returncode}); log:\n{tail}")
        try:
            status, health = request(sock, "GET", "/v1/health", timeout=1.0)
            if status == 200 and all(w.get("alive") for w in health.get("workers", [])):
                return
        except (OSError, ValueError, IndexError):
            pass
        if time.monotonic() > deadline:
            raise GatewayError(f"perigee gateway in {topo.ns(role)} did not answer /v1/health in {timeout:.0f} s")
        time.sleep(0.05)


def _stop_one(topo: TopologyLike, role: str, grace: float = 15.0) -> None:
    _, pidfile, _ = _files(topo, role)
    pid = _read_pid(pidfile)
    if pid is not None and _alive(pid):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            cmd = b""
        if b"gateway" in cmd:
            os.kill(pid, signal.SIGTERM)  # the daemon removes its nft table, rules, routes, stops Squid
            deadline = time.monotonic() + grace
            while _alive(pid) and time.monotonic() < deadline:
                _reap(pid)
                time.sleep(0.05)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
            _reap(pid)
    for p in (pidfile, socket_path(topo, role)):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def start(topo: TopologyLike, where: str, timeout: float = 45.0, cache: bool | None = None) -> None:
    """Start the gateway(s); `cache` None means: as $SATLAB_GATEWAY_CACHE says (default off)."""
    if where not in WHERE:
        raise GatewayError(f"--gateway must be one of {', '.join(WHERE)}, not {where!r}")
    with_cache = cache_from_env() if cache is None else cache
    started: list[str] = []
    try:
        for role in WHERE[where]:
            _start_one(topo, role, timeout, with_cache)
            started.append(role)
    except BaseException:
        for role in started:
            _stop_one(topo, role)
        raise


def stop(topo: TopologyLike, where: str | None = None) -> None:
    for role in WHERE.get(where or "both", WHERE["both"]):
        _stop_one(topo, role)
