"""Bringing the lab up and down: namespaces, veths, addresses, routes, emulators, servers."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from . import gateway as gateway_hook
from . import linkctl, procs, webservices
from .cluster import fabric, frr, plan
from .cluster import state as cluster_state
from .profiles import CROSS_PARAMS, Params
from .sysrun import CommandError, ip, list_namespaces, run, run_ns
from .topology import LINKS, SERVER_V4, SERVER_V6, EmulatedLink, Topology

LAB_DIR = Path(__file__).resolve().parent.parent
EMULATOR_BIN = Path(os.environ.get("SATLAB_LINK_BIN", LAB_DIR / "emulator/target/release/satlab-link"))
OFFLOADS = ("tso", "gso", "gro", "tx", "rx")
STATE_FILE = "state.json"


class LabError(RuntimeError):
    """A user-facing failure: printed as one line, exit status 1."""


@contextmanager
def locked(topo: Topology) -> Iterator[None]:
    """Serialise up/down for one prefix (the lock file sits beside, not inside, the run dir)."""
    os.makedirs(topo.run_root, exist_ok=True)
    with open(os.path.join(topo.run_root, f".{topo.prefix}lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def ctl_socket(topo: Topology, link: str) -> str:
    return topo.path(f"{link}-link.sock")


def load_state(topo: Topology) -> dict[str, Any] | None:
    try:
        with open(topo.path(STATE_FILE)) as f:
            state: dict[str, Any] = json.load(f)
            return state
    except (OSError, ValueError):
        return None


def save_state(topo: Topology, state: dict[str, Any]) -> None:
    tmp = topo.path(STATE_FILE + ".tmp")
    with open(tmp, "w") as f:
        json.dump(state, f, indent=2)
    os.replace(tmp, topo.path(STATE_FILE))


def current(topo: Topology) -> Topology:
    """The topology as the running lab has it (its cluster size is in its state file)."""
    state = load_state(topo) or {}
    n = int(state.get("hub_gateways") or 0)
    return topo if n == topo.hub_gateways else dataclasses.replace(topo, hub_gateways=n)


def existing_namespaces(topo: Topology) -> list[str]:
    ours = set(topo.namespaces)
    return [n for n in list_namespaces() if n in ours]


# --- building ---------------------------------------------------------------------------------

def _disable_offloads(ns: str, dev: str) -> None:
    args = [x for feat in OFFLOADS for x in (feat, "off")]
    if run_ns(ns, ["ethtool", "-K", dev, *args], check=False).returncode != 0:
        # Some features are fixed on some kernels: set the changeable ones one by one.
        for feat in OFFLOADS:
            run_ns(ns, ["ethtool", "-K", dev, feat, "off"], check=False)


def _sysctl(ns: str, *settings: str) -> None:
    run_ns(ns, ["sysctl", "-q", "-w", *settings])


def _mac(ns: str, dev: str) -> str:
    info = json.loads(ip(ns, "-j", "link", "show", "dev", dev).stdout)
    return str(info[0]["address"])


def build_network(topo: Topology) -> None:
    net = plan.network(topo)
    for role in topo.roles:
        run(["ip", "netns", "add", topo.ns(role)])
    for role in topo.roles:
        ns = topo.ns(role)
        ip(ns, "link", "set", "lo", "up")
        if role == "sat":
            # The emulator namespace is a wire, not a host: no IPv6 chatter of its own.
            _sysctl(ns, "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
        if role in net.routers:
            _sysctl(ns, "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
    for v in net.veths:
        # Created directly in both namespaces: no name ever appears in the root namespace.
        ip(topo.ns(v.a.role), "link", "add", v.a.name, "type", "veth",
           "peer", "name", v.b.name, "netns", topo.ns(v.b.role))
        for end in (v.a, v.b):
            ns = topo.ns(end.role)
            if v.emulated:
                _disable_offloads(ns, end.name)
            for addr in end.v4:
                ip(ns, "addr", "add", addr, "dev", end.name)
            for i, addr in enumerate(end.v6):
                # Extra addresses are deprecated (preferred_lft 0): usable when bound explicitly,
                # never picked as the default source, so the first address is the host's identity.
                extra = ["preferred_lft", "0"] if i else []
                ip(ns, "-6", "addr", "add", addr, "dev", end.name, "nodad", *extra)
            ip(ns, "link", "set", end.name, "up")
    for r in net.routes:
        fam = "-6" if ":" in r.via else "-4"
        ip(topo.ns(r.role), fam, "route", "replace", r.dest, "via", r.via)
    # Permanent neighbours across the emulated links: ARP/ND over a 600 ms lossy link would add
    # spurious delay and drops to the first packets and to any saturating test.
    for v_left, v_right in net.emulated_neighbours:
        for here, there in ((v_left, v_right), (v_right, v_left)):
            mac = _mac(topo.ns(there.role), there.name)
            for addr in there.v4 + there.v6:
                ip(topo.ns(here.role), "neigh", "replace", addr.split("/")[0], "lladdr", mac,
                   "dev", here.name, "nud", "permanent")


def start_emulator(topo: Topology, link: EmulatedLink, forward: Params, ret: Params, seed: int) -> None:
    if not EMULATOR_BIN.is_file():
        raise LabError(f"link emulator not built: {EMULATOR_BIN} (run: make -C {LAB_DIR}/emulator build)")
    a_to_b, b_to_a = (forward, ret) if link.forward == "a_to_b" else (ret, forward)
    cfg = topo.path(f"{link.name}-link.json")
    with open(cfg, "w") as f:
        json.dump({"a_to_b": a_to_b, "b_to_a": b_to_a}, f, indent=2)
    sock = ctl_socket(topo, link.name)
    pidfile = topo.path(f"{link.name}-link.pid")
    # Higher CPU priority: the emulator's timing is the lab's accuracy, and the host is shared.
    argv = ["nice", "-n", "-10", str(EMULATOR_BIN), "--a", link.a, "--b", link.b, "--control", sock,
            "--config", cfg, "--seed", str(seed), "--pidfile", pidfile]
    procs.spawn(topo.ns("sat"), argv, pidfile, topo.path(f"{link.name}-link.log"))
    deadline = time.monotonic() + 10
    while True:
        try:
            linkctl.get(sock)
            return
        except (linkctl.LinkControlError, OSError, ValueError) as e:
            pid = procs.read_pid(pidfile)
            if pid is None or not procs.alive(pid) or time.monotonic() > deadline:
                log = Path(topo.path(f"{link.name}-link.log")).read_text(errors="replace")[-800:]
                raise LabError(f"{link.name} link emulator did not start ({e}); log:\n{log}") from e
            time.sleep(0.05)


SERVICES = (
    # name, namespace role, argv after `python -m satlab.servers`
    ("http", "server", ["http", "--port", "80"]),
    ("bulk", "server", ["bulk", "--port", "5001"]),
    ("cross-bulk", "cross", ["bulk", "--port", "5001"]),
)


def start_servers(topo: Topology) -> None:
    for name, role, args in SERVICES:
        procs.spawn(topo.ns(role), [sys.executable, "-m", "satlab.servers", *args],
                    topo.path(f"{name}.pid"), topo.path(f"{name}.log"))


def wait_ready(topo: Topology, timeout: float) -> None:
    """Ping client -> server (v4 and v6), and check the servers listen."""
    deadline = time.monotonic() + timeout
    # A hub cluster routes IPv4 only (docs/cluster.md, limits).
    for target in (SERVER_V4,) if topo.hub_gateways else (SERVER_V4, SERVER_V6):
        while True:
            p = run_ns(topo.ns("client"), ["ping", "-n", "-c", "1", "-W", "3", target], check=False, timeout=10)
            if p.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise LabError(f"no ping answer from {target} within {timeout:.0f} s")
    for name, role, args in SERVICES:
        port = args[args.index("--port") + 1]
        while True:
            out = run_ns(topo.ns(role), ["ss", "-Hltn", f"sport = :{port}"], check=False).stdout
            if out.strip():
                break
            pid = procs.read_pid(topo.path(f"{name}.pid"))
            if pid is None or not procs.alive(pid) or time.monotonic() > deadline:
                log = Path(topo.path(f"{name}.log")).read_text(errors="replace")[-800:]
                raise LabError(f"{name} server did not start; log:\n{log}")
            time.sleep(0.05)


def up(topo: Topology, profile: str, forward: Params, ret: Params, gateway: str | None,
       seed: int = 1, timeout: float = 30.0, idle_timer_s: int = fabric.DEFAULT_IDLE_TIMER_S,
       configured: bool = True) -> dict[str, Any]:
    with locked(topo):
        present = existing_namespaces(topo)
        if present or os.path.exists(topo.path(STATE_FILE)):
            what = ", ".join(present) if present else topo.run_dir
            raise LabError(f"satlab '{topo.prefix}' is already up ({what}); run 'satlab down' first")
        os.makedirs(topo.run_dir, exist_ok=True)
        state: dict[str, Any] = {
            "prefix": topo.prefix, "profile": profile, "started": time.time(),
            "forward": forward, "return": ret, "cross": CROSS_PARAMS, "gateway": None,
            "namespaces": topo.namespaces,
        }
        splitters = gateway in ("hub", "both")
        if topo.hub_gateways:
            state["hub_gateways"] = topo.hub_gateways
            state["cluster"] = {"idle_timer_s": idle_timer_s, "hash_seed": fabric.hash_seed(seed),
                                "buckets": fabric.BUCKETS, "splitters": splitters}
        save_state(topo, state)
        try:
            build_network(topo)
            if topo.hub_gateways:
                fabric.prepare_network(topo, seed)
            start_emulator(topo, LINKS[0], forward, ret, seed)
            start_emulator(topo, LINKS[1], CROSS_PARAMS, CROSS_PARAMS, seed + 1)
            start_servers(topo)
            webservices.start(topo)
            if topo.hub_gateways:
                fabric.start_routing(topo, idle_timer_s, splitters, peer=gateway == "both" and configured)
                if gateway and splitters:
                    # The gateways' BFD stays shut until their daemons serve: start them first.
                    _start_gateway(topo, gateway, state, configured)
                    for role in topo.gateway_roles:
                        fabric.start_announcer(topo, role)
                    fabric.wait_serving(topo, set(topo.gateway_roles))
                cluster_state.wait_converged(topo, set(topo.gateway_roles))
                if gateway == "both" and configured:
                    # The peer path: the terminal's pools to every gateway (the controller's table named them).
                    gateway_hook.wait_peer_pool(gateway_hook.socket_path(topo, "terminal"), hubs=topo.hub_gateways)
            wait_ready(topo, timeout)
            webservices.wait_ready(topo, time.monotonic() + timeout)
            if gateway and not (topo.hub_gateways and splitters):
                _start_gateway(topo, gateway, state, configured)
        except (fabric.ClusterError, frr.FrrError) as e:
            _teardown(topo)
            raise LabError(str(e)) from e
        except webservices.WebServiceError as e:
            _teardown(topo)
            raise LabError(str(e)) from e
        except BaseException:
            _teardown(topo)
            raise
    return state


def _start_gateway(topo: Topology, gateway: str, state: dict[str, Any], configured: bool = True) -> None:
    try:
        gateway_hook.start(topo, gateway, configured=configured)
    except Exception as e:  # the gateway module's own error type: report it as ours
        raise LabError(f"gateway on {gateway} did not start: {e}") from e
    state["gateway"] = gateway
    save_state(topo, state)


# --- tearing down -----------------------------------------------------------------------------

def _teardown(topo: Topology) -> None:
    topo = current(topo)
    state = load_state(topo) or {}
    if state.get("gateway"):
        try:
            gateway_hook.stop(topo, state["gateway"])
        except Exception as e:  # keep tearing down the rest
            print(f"satlab: gateway.stop failed: {e}", file=sys.stderr)
    if topo.hub_gateways:
        fabric.stop(topo)
    for name, _role, _args in SERVICES:
        procs.stop_pidfile(topo.path(f"{name}.pid"), "satlab")
    webservices.stop(topo)
    for link in LINKS:
        sock = ctl_socket(topo, link.name)
        if os.path.exists(sock):
            linkctl.shutdown(sock)
        procs.stop_pidfile(topo.path(f"{link.name}-link.pid"), "satlab-link")
    for ns in existing_namespaces(topo):
        # Anything still running inside our namespaces was started in our lab (satlab exec ...).
        pids = run(["ip", "netns", "pids", ns], check=False).stdout.split()
        for pid in pids:
            procs.stop_pid(int(pid), grace=1.0)
        try:
            run(["ip", "netns", "del", ns])
        except CommandError as e:
            print(f"satlab: {e}", file=sys.stderr)
    shutil.rmtree(topo.run_dir, ignore_errors=True)


def down(topo: Topology) -> None:
    with locked(topo):
        _teardown(topo)
