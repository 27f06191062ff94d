"""FRR in the cluster's namespaces: each router and gateway runs its own zebra, bgpd and bfdd with its
own config and runtime directory (`<run_dir>/frr-<role>/`), never the system's `frr` service.

BGP design (docs/cluster.md):
- the hub router (AS 65001) originates the client subnets, the edge router (AS 65002) the server and
  cross subnets; each gateway (AS 65100, all alike) peers with both over IPv4 and IPv6 and passes each
  side's routes to the other with itself as next hop, so each router learns the far side once per
  gateway and installs them as equal-cost paths;
- every session has BFD (100 ms x 3): a gateway that stops answering is gone from the routers in 0.3 s;
- a gateway whose splitter is not serving prepends its AS three times (`announcer.py`), so the routers
  prefer the serving gateways and use it only when none serves (the cluster fails open as a whole);
- a draining gateway sends its routes with the GRACEFUL_SHUTDOWN community (RFC 8326, FRR's
  `bgp graceful-shutdown`); the routers give them local preference 0, keeping the paths but taking
  them out of the equal-cost set (the controller keeps the gateway's busy buckets until they are idle).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import time
from pathlib import Path
from typing import Any

from .. import procs
from ..sysrun import run
from ..topology import EDGE_ROLE, Topology
from .plan import (
    CLIENT_PREFIXES,
    EDGE_ASN,
    GATEWAY_ASN,
    HUB_ASN,
    SERVER_PREFIXES,
    Member,
    members,
)

FRR_DIR = Path(os.environ.get("SATLAB_FRR_DIR", "/usr/lib/frr"))
VTYSH = os.environ.get("SATLAB_VTYSH", "vtysh")
DAEMONS = ("zebra", "bgpd", "bfdd")
# 150 ms x 4 = 0.6 s to declare a gateway dead: within the 1 s budget with room for BGP, zebra and the
# controller, and not so tight that a loaded 2-core lab host drops sessions of gateways that are fine.
BFD_INTERVAL_MS = 150
BFD_MULTIPLIER = 4
NICE = "-5"  # above the lab's traffic, below the link emulator (-10): late BFD packets are flaps
PREPEND = 3  # how many times a gateway that does not serve prepends its AS


class FrrError(RuntimeError):
    pass


def frr_dir(topo: Topology, role: str) -> str:
    return topo.path(f"frr-{role}")


# One file for zebra, bgpd and bfdd: each daemon skips the others' commands, so blocks end with "!"
# (a comment: the next top-level command leaves the block), never "exit", which would take a daemon that
# skipped the block's opening line out of configuration mode for the rest of the file.
def _header(topo: Topology, role: str) -> list[str]:
    d = frr_dir(topo, role)
    return [
        "frr defaults datacenter",
        f"hostname {topo.ns(role)}",
        f"log file {d}/frr.log informational",
        "!",
    ]


def _bfd_block() -> list[str]:
    return [
        "bfd",
        " profile cluster",
        f"  detect-multiplier {BFD_MULTIPLIER}",
        f"  receive-interval {BFD_INTERVAL_MS}",
        f"  transmit-interval {BFD_INTERVAL_MS}",
        "!",
    ]


def _peer_group(name: str, remote_as: int | str) -> list[str]:
    return [
        f" neighbor {name} peer-group",
        f" neighbor {name} remote-as {remote_as}",
        f" neighbor {name} bfd",
        f" neighbor {name} bfd profile cluster",
        f" neighbor {name} timers connect 1",
        f" neighbor {name} advertisement-interval 0",
    ]


def render_router(topo: Topology, role: str) -> str:
    """The hub (satellite side) or edge (internet side) router."""
    networks: tuple[str, ...]
    if role == "hub":
        asn, router_id, networks = HUB_ASN, "10.71.2.2", CLIENT_PREFIXES
        peers = [(m.hub_side_v4, m.hub_side_v6) for m in members(topo)]
    elif role == EDGE_ROLE:
        asn, router_id, networks = EDGE_ASN, "10.71.3.1", SERVER_PREFIXES
        peers = [(m.edge_side_v4, m.edge_side_v6) for m in members(topo)]
    else:
        raise ValueError(f"not a cluster router: {role!r}")
    lines = _header(topo, role) + [
        # zebra installs the equal-cost routes as plain multipath routes in main, with no kernel
        # next-hop objects of its own: its object ids would be allocated past the highest id it has
        # seen, i.e. among the cluster controller's, and the two would overwrite each other.
        "no zebra nexthop kernel enable",
        "!",
        "bgp community-list standard DRAINING seq 5 permit graceful-shutdown",
        "!",
        "route-map FROM-GATEWAY permit 10",
        " match community DRAINING",
        " set local-preference 0",
        "!",
        "route-map FROM-GATEWAY permit 20",
        "!",
        f"router bgp {asn}",
        f" bgp router-id {router_id}",
        " no bgp ebgp-requires-policy",
        " no bgp default ipv4-unicast",
        *_peer_group("GW4", GATEWAY_ASN),
        *_peer_group("GW6", GATEWAY_ASN),
    ]
    for v4, v6 in peers:
        lines += [f" neighbor {v4} peer-group GW4", f" neighbor {v6} peer-group GW6"]
    for fam, group in (("ipv4", "GW4"), ("ipv6", "GW6")):
        lines += [f" address-family {fam} unicast"]
        lines += [f"  network {p}" for p in networks if (":" in p) == (fam == "ipv6")]
        lines += [f"  neighbor {group} activate", f"  neighbor {group} route-map FROM-GATEWAY in",
                  "  maximum-paths 16", " exit-address-family"]
    return "\n".join(lines + ["!", *_bfd_block(), ""])


def render_gateway(topo: Topology, m: Member, serving: bool) -> str:
    """A gateway: passes each router's routes to the other with itself as next hop."""
    lines = _header(topo, m.role) + [
        "route-map TO-ROUTER permit 10",
        *([] if serving else [f" set as-path prepend {' '.join([str(GATEWAY_ASN)] * PREPEND)}"]),
        "!",
        f"router bgp {GATEWAY_ASN}",
        f" bgp router-id {m.router_id}",
        " no bgp ebgp-requires-policy",
        " no bgp default ipv4-unicast",
        *_peer_group("R4", "external"),
        *_peer_group("R6", "external"),
        f" neighbor {m.hub_v4} peer-group R4",
        f" neighbor {m.edge_v4} peer-group R4",
        f" neighbor {m.hub_v6} peer-group R6",
        f" neighbor {m.edge_v6} peer-group R6",
    ]
    for fam, group in (("ipv4", "R4"), ("ipv6", "R6")):
        lines += [f" address-family {fam} unicast", f"  neighbor {group} activate",
                  f"  neighbor {group} route-map TO-ROUTER out", " exit-address-family"]
    return "\n".join(lines + ["!", *_bfd_block(), ""])


def _frr_ids() -> tuple[int, int]:
    try:
        pw = pwd.getpwnam("frr")
    except KeyError as e:
        raise FrrError("user frr missing: install Debian's frr (scripts/apt/lab.txt)") from e
    return pw.pw_uid, pw.pw_gid


def available() -> str | None:
    """None when FRR can run here, else why not."""
    missing = [str(FRR_DIR / d) for d in DAEMONS if not (FRR_DIR / d).is_file()]
    if shutil.which(VTYSH) is None:
        missing.append(VTYSH)
    if missing:
        return f"FRR is not installed ({', '.join(missing)} missing; Debian package frr, scripts/apt/lab.txt)"
    return None


def write_config(topo: Topology, role: str, text: str) -> None:
    d = frr_dir(topo, role)
    uid, gid = _frr_ids()
    os.makedirs(d, mode=0o750, exist_ok=True)
    os.chown(d, uid, gid)
    path = os.path.join(d, "frr.conf")
    Path(path).write_text(text)
    os.chown(path, uid, gid)


def start(topo: Topology, role: str, timeout: float = 10.0) -> None:
    """zebra, then bgpd and bfdd, in the role's namespace; returns once vtysh reaches all three."""
    d = frr_dir(topo, role)
    conf, zsock = os.path.join(d, "frr.conf"), os.path.join(d, "zserv.api")
    for daemon in DAEMONS:
        argv = ["nice", "-n", NICE, str(FRR_DIR / daemon), "-f", conf, "-i", os.path.join(d, f"{daemon}.pid"),
                "-z", zsock, "--vty_socket", d, "--log", f"file:{d}/{daemon}.log"]
        if daemon == "bfdd":
            argv += ["--bfdctl", os.path.join(d, "bfdd.sock")]
        if daemon == "bgpd":
            argv += ["--limit-fds", "1024"]
        procs.spawn(topo.ns(role), argv, os.path.join(d, f"{daemon}.run.pid"),
                    os.path.join(d, f"{daemon}.out"))
        if daemon == "zebra":
            _wait_path(zsock, timeout, f"zebra in {topo.ns(role)}")
    deadline = time.monotonic() + timeout
    while True:
        try:
            vtysh(topo, role, "show bgp summary json")
            vtysh(topo, role, "show bfd peers json")
            return
        except FrrError as e:
            if time.monotonic() > deadline:
                raise FrrError(f"FRR in {topo.ns(role)} did not start: {e}") from e
            time.sleep(0.1)


def _wait_path(path: str, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise FrrError(f"{what} did not start ({path} missing)")
        time.sleep(0.05)


def stop(topo: Topology, role: str) -> None:
    d = frr_dir(topo, role)
    for daemon in reversed(DAEMONS):
        procs.stop_pidfile(os.path.join(d, f"{daemon}.run.pid"), daemon)


def running(topo: Topology, role: str) -> bool:
    d = frr_dir(topo, role)
    pids = [procs.read_pid(os.path.join(d, f"{daemon}.run.pid")) for daemon in DAEMONS]
    return all(p is not None and procs.alive(p) for p in pids)


def vtysh(topo: Topology, role: str, *commands: str, timeout: float = 10.0) -> str:
    argv = [VTYSH, "--vty_socket", frr_dir(topo, role)]
    for c in commands:
        argv += ["-c", c]
    try:
        p = run(argv, check=False, timeout=timeout)
    except (OSError, TimeoutError) as e:
        raise FrrError(f"vtysh in {topo.ns(role)}: {e}") from e
    if p.returncode != 0:
        raise FrrError(f"vtysh {' / '.join(commands)} in {topo.ns(role)}: {(p.stderr or p.stdout).strip()}")
    return p.stdout


def vtysh_json(topo: Topology, role: str, *commands: str) -> list[Any]:
    """Each command's JSON answer (vtysh prints them one after the other)."""
    text = vtysh(topo, role, *commands)
    dec, i = json.JSONDecoder(), 0
    out: list[Any] = []
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        try:
            obj, i = dec.raw_decode(text, i)
        except ValueError as e:
            raise FrrError(f"vtysh in {topo.ns(role)} answered non-JSON: {text[i:i + 200]!r}") from e
        out.append(obj)


def configure(topo: Topology, role: str, *lines: str) -> None:
    """Lines in configuration mode (`configure terminal` ... `end`)."""
    vtysh(topo, role, "configure terminal", *lines, "end")
