"""A cluster gateway as a member of the management API's fleet (docs/cluster.md, *Fleet control plane*).

`enroll` gives gateway K a management link to the host (root namespace: `<prefix>mK` 10.79.(10+K).1/30, in the
gateway `mgmt0` 10.79.(10+K).2/30), stores the TLS credentials the API issued when it registered the gateway
at `address(K)`, and restarts its daemon with the TLS control listener on the management address. The
splitter never sees the management link: it is neither a LAN nor the satellite interface of its config.
It also gives the cluster one next hop toward the clients, 10.71.10.1, that every gateway reaches, so that
one config (satellite route `10.71.1.0/24 via 10.71.10.1`) fits every member.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..sysrun import ip, run
from ..topology import Paths, Topology

PORT = 7443
FILES = ("ca.pem", "cert.pem", "key.pem")


def _index(role: str) -> int:
    return int(role[2:])


def host_ip(role: str) -> str:
    return f"10.79.{10 + _index(role)}.1"


def gateway_ip(role: str) -> str:
    return f"10.79.{10 + _index(role)}.2"


def address(role: str) -> str:
    """What the API registers the gateway at: its TLS control listener on the management link."""
    return f"{gateway_ip(role)}:{PORT}"


def tls_dir(topo: Paths, role: str) -> Path:
    return Path(topo.path(f"fleet-{topo.ns(role)}"))


def tls_args(topo: Paths, role: str) -> tuple[str, ...]:
    """The daemon's TLS listener arguments once the gateway is enrolled, else none."""
    d = tls_dir(topo, role)
    if not all((d / f).exists() for f in FILES):
        return ()
    return ("--control-tls-listen", address(role), "--control-tls-cert", str(d / "cert.pem"),
            "--control-tls-key", str(d / "key.pem"), "--control-tls-ca", str(d / "ca.pem"))


def _link(topo: Topology, role: str) -> None:
    host_if = f"{topo.prefix}m{_index(role)}"
    if ip(topo.ns(role), "link", "show", "mgmt0", check=False).returncode == 0:
        return
    run(["ip", "link", "add", host_if, "type", "veth", "peer", "name", "mgmt0", "netns", topo.ns(role)])
    run(["ip", "addr", "add", f"{host_ip(role)}/30", "dev", host_if])
    run(["ip", "link", "set", host_if, "up"])
    ip(topo.ns(role), "addr", "add", f"{gateway_ip(role)}/30", "dev", "mgmt0")
    ip(topo.ns(role), "link", "set", "mgmt0", "up")


def store(topo: Topology, role: str, ca_pem: str, cert_pem: str, key_pem: str) -> None:
    d = tls_dir(topo, role)
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name, text in zip(FILES, (ca_pem, cert_pem, key_pem), strict=True):
        fd = os.open(d / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)


# One config for every member needs one next hop toward the clients that every gateway reaches, as a router
# pair's virtual address would be: the hub router answers for it on all its gateway links (a local address,
# answered by ARP on any interface), and each gateway's sat0 gets an address in its subnet.
SHARED_NEXT_HOP = "10.71.10.1"


def shared_next_hop(topo: Topology) -> None:
    """Idempotent: the hub router's shared next hop, and each gateway's address beside it."""
    hub = topo.ns("hub")
    if SHARED_NEXT_HOP not in ip(hub, "-4", "addr", "show", "dev", "lo").stdout:
        ip(hub, "addr", "add", f"{SHARED_NEXT_HOP}/32", "dev", "lo")
    for role in topo.gateway_roles:
        mine = f"10.71.10.{1 + _index(role)}"
        if mine not in ip(topo.ns(role), "-4", "addr", "show", "dev", "sat0").stdout:
            ip(topo.ns(role), "addr", "add", f"{mine}/24", "dev", "sat0")


def prepare(topo: Topology, role: str, ca_pem: str, cert_pem: str, key_pem: str) -> str:
    """The management link, the shared next hop and the credentials; the daemon takes them at its next start.
    Returns the address."""
    _link(topo, role)
    shared_next_hop(topo)
    store(topo, role, ca_pem, cert_pem, key_pem)
    return address(role)
