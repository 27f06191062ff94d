"""Operating one gateway of the cluster: crash it, cut its links, start it, drain it.

- crash: SIGKILL the daemon (its nft table stays, nothing listens); the announcer notices within 100 ms
  and the routers move the gateway's buckets to the others.
- links down/up: both of the gateway's links; the routers lose the next hop at once (carrier), BFD and
  BGP follow.
- start: FRR, the daemon and the announcer, whichever is not running; the gateway comes back into the
  routers' groups and gains buckets as they go idle (only new flows reach it).
- drain: the gateway's routes get the GRACEFUL_SHUTDOWN community, the routers stop giving it buckets
  and take each of its buckets once idle; when it holds none on either router and its flow table is
  empty, the daemon, the announcer and FRR stop. Nothing is reset.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from perigee_control.client import GatewayError as ControlError

from .. import gateway
from ..sysrun import ip
from ..topology import EDGE_ROLE, Topology
from . import fabric, fleet, frr, state
from .plan import GATEWAY_ASN, SERVER_PREFIXES


class MemberError(RuntimeError):
    pass


def _check(topo: Topology, role: str) -> None:
    if role not in topo.gateway_roles:
        raise MemberError(f"{role!r} is not a gateway of this cluster ({', '.join(topo.gateway_roles)})")


def crash(topo: Topology, role: str) -> None:
    _check(topo, role)
    gateway.stop_one(topo, role, crash=True)


def set_links(topo: Topology, role: str, up: bool) -> None:
    _check(topo, role)
    for dev in ("sat0", "lan0"):
        ip(topo.ns(role), "link", "set", dev, "up" if up else "down")
    if up and _answers(topo, role):
        # The kernel dropped the daemon's satellite routes with the link (without telling anyone: zebra
        # still believes in them) and the daemon does not watch links: apply its config again.
        sock = gateway.socket_path(topo, role)
        try:
            gateway.client(sock, timeout=30.0).apply_config(gateway.client(sock).get_config())
        except ControlError as exc:
            raise MemberError(f"{role}: re-applying its config after the links came back failed: {exc}") from exc


def start(topo: Topology, role: str, wait: bool = True) -> None:
    _check(topo, role)
    if not frr.running(topo, role):
        frr.stop(topo, role)
        frr.start(topo, role)
    frr.configure(topo, role, f"router bgp {GATEWAY_ASN}", "no bgp graceful-shutdown")
    if not _answers(topo, role):
        gateway.start_one(topo, role, peer=gateway.lab_peer_pins(topo))
    if not fabric.announcer_running(topo, role):
        fabric.start_announcer(topo, role)
    if wait:
        fabric.wait_serving(topo, {role})


def enroll(topo: Topology, role: str, credentials: dict[str, str]) -> str:
    """Make the gateway a fleet member (cluster/fleet.py): management link, credentials, daemon restarted with
    its TLS control listener. Returns the address the API registered it at."""
    _check(topo, role)
    addr = fleet.prepare(topo, role, credentials["ca_pem"], credentials["cert_pem"], credentials["key_pem"])
    gateway.stop_one(topo, role)
    start(topo, role)
    return addr


def _answers(topo: Topology, role: str) -> bool:
    try:
        gateway.client(gateway.socket_path(topo, role), timeout=1.0).json.health()
        return True
    except ControlError:
        return False


def live_flows(topo: Topology, role: str) -> int | None:
    try:
        return gateway.client(gateway.socket_path(topo, role), timeout=2.0).counters().flows_live
    except ControlError:
        return None


def held_buckets(topo: Topology, role: str) -> int:
    """Buckets the gateway still holds on either router, any cluster prefix."""
    total = 0
    for prefix in SERVER_PREFIXES:
        total += state.bucket_counts(state.buckets(topo, "hub", prefix)).get(role, 0)
    for prefix in ("10.71.1.0/24", "fd71:1::/64"):
        total += state.bucket_counts(state.buckets(topo, EDGE_ROLE, prefix)).get(role, 0)
    return total


@dataclass
class DrainResult:
    drained_s: float  # from the request to no bucket and no flow left
    stopped_s: float  # ... to the gateway stopped
    flows_at_start: int | None


# How long "no bucket and no flow" must hold before a drained gateway is stopped: longer than two of its
# workers' 1 s reports of their live flows to the master, so a flow accepted just before the last bucket
# moved away is counted (and waited for) rather than cut by the stop.
SETTLE_S = 2.5


def drain(topo: Topology, role: str, timeout: float = 120.0, poll: float = 0.2,
          settle: float = SETTLE_S) -> DrainResult:
    _check(topo, role)
    t0 = time.monotonic()
    flows_at_start = live_flows(topo, role)
    frr.configure(topo, role, f"router bgp {GATEWAY_ASN}", "bgp graceful-shutdown")
    quiet_since: float | None = None
    while True:
        buckets = held_buckets(topo, role)
        flows = live_flows(topo, role)  # None: the gateway did not answer, which is not "no flows"
        now = time.monotonic()
        if buckets == 0 and flows == 0:
            if quiet_since is None:
                quiet_since = now
            if now - quiet_since >= settle:
                break
        else:
            quiet_since = None
        if now - t0 > timeout:
            raise MemberError(f"{role} still holds {buckets} buckets and {flows} flows after {timeout:.0f} s "
                              "of draining")
        time.sleep(poll)
    drained = time.monotonic() - t0
    fabric.stop_announcer(topo, role)
    gateway.stop_one(topo, role)
    frr.stop(topo, role)
    return DrainResult(drained, time.monotonic() - t0, flows_at_start)


def describe(topo: Topology) -> dict[str, Any]:
    return state.status(topo)
