"""Bringing the lab's web up and down: TLS material, the HTTPS/HTTP3 origins, the DNS server and
the client namespace's resolver. Called by `satlab up` / `satlab down` (lab.py)."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from . import dnsserver, procs, webtls
from .sysrun import CommandError, run_ns
from .topology import Topology
from .webnames import DNS_V4, HTTPS_PORT, ORIGINS

# name -> (namespace role, what its command line contains: stop only what is still ours)
SERVICES = {"web": ("server", "satlab"), "dns": ("server", "nsd")}
RESOLVER_ROLES = ("client",)


class WebServiceError(RuntimeError):
    pass


def tls_dir(topo: Topology) -> str:
    return topo.path("web-tls")


def start(topo: Topology) -> None:
    missing = [p for p in (dnsserver.NSD, "openssl") if shutil.which(p) is None]
    if missing:
        raise WebServiceError(f"{', '.join(missing)} not installed (Debian packages, scripts/apt/lab.txt)")
    try:
        tls = webtls.create(tls_dir(topo))
    except (CommandError, RuntimeError, OSError) as e:
        raise WebServiceError(f"lab TLS certificates: {e}") from e
    procs.spawn(topo.ns("server"), [sys.executable, "-m", "satlab.servers", "web", "--port", str(HTTPS_PORT),
                                    "--cert", tls.chain, "--key", tls.key],
                topo.path("web.pid"), topo.path("web.log"))
    procs.spawn(topo.ns("server"), dnsserver.prepare(topo.path("dns")), topo.path("dns.pid"),
                topo.path("dns.log"))
    for role in RESOLVER_ROLES:
        dnsserver.write_resolv_conf(topo.ns(role))


def _listening(topo: Topology) -> dict[str, bool]:
    ns = topo.ns("server")
    tcp = run_ns(ns, ["ss", "-Hltn", f"sport = :{HTTPS_PORT}"], check=False).stdout
    udp = run_ns(ns, ["ss", "-Hlun", f"sport = :{HTTPS_PORT}"], check=False).stdout
    dns = run_ns(ns, ["ss", "-Hlun", "sport = :53"], check=False).stdout
    first = ORIGINS[0].v4
    return {"web": f"{first}:{HTTPS_PORT}" in tcp and f"{first}:{HTTPS_PORT}" in udp, "dns": f"{DNS_V4}:53" in dns}


def wait_ready(topo: Topology, deadline: float) -> None:
    while True:
        ready = _listening(topo)
        if all(ready.values()):
            return
        for name, ok in ready.items():
            pid = procs.read_pid(topo.path(f"{name}.pid"))
            if not ok and (pid is None or not procs.alive(pid) or time.monotonic() > deadline):
                log = Path(topo.path(f"{name}.log")).read_text(errors="replace")[-800:] \
                    if os.path.exists(topo.path(f"{name}.log")) else ""
                raise WebServiceError(f"{name} server did not start; log:\n{log}")
        time.sleep(0.05)


def stop(topo: Topology) -> None:
    for name, (_role, must_contain) in SERVICES.items():
        procs.stop_pidfile(topo.path(f"{name}.pid"), must_contain)
    for role in RESOLVER_ROLES:
        dnsserver.remove_resolv_conf(topo.ns(role))


def status(topo: Topology) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, (role, _) in SERVICES.items():
        pid = procs.read_pid(topo.path(f"{name}.pid"))
        port = 53 if name == "dns" else HTTPS_PORT
        out[name] = {"namespace": topo.ns(role), "port": port, "pid": pid,
                     "running": pid is not None and procs.alive(pid)}
    return out
