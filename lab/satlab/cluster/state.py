"""What the cluster looks like right now, read from where it lives: the routers' kernel bucket tables,
FRR's BGP and BFD state (vtysh JSON), the gateways' daemons and the controller's and announcers' status files.
"""

from __future__ import annotations

import json
import time
from typing import Any

from perigee_control.client import BAD_ANSWER, UNREACHABLE
from perigee_control.client import GatewayError as ControlError

from .. import procs
from ..sysrun import ip
from ..topology import EDGE_ROLE, Topology
from . import fabric, frr
from .plan import members

# The pairs of routes that must map every flow the same way: a flow from a client to a server is hashed
# by the hub's route to the server prefix and answered through the edge's route to the client prefix.
PAIRED = (("10.71.3.0/24", "10.71.1.0/24"),)  # IPv4: the cluster routes IPv4 (frr.v4)


def _json(ns: str, *args: str) -> list[dict[str, Any]]:
    p = ip(ns, "-j", *args, check=False)
    if p.returncode != 0 or not p.stdout.strip():
        return []
    data: list[dict[str, Any]] = json.loads(p.stdout)
    return data


def buckets(topo: Topology, role: str, prefix: str) -> list[str | None]:
    """The gateway behind each bucket of the router's route to `prefix`, as the kernel has it
    ([] without a route)."""
    ns = topo.ns(role)
    fam = "-6" if ":" in prefix else "-4"
    route = _json(ns, fam, "route", "show", "table", str(fabric.TABLE), prefix)
    if not route or "nhid" not in route[0]:
        return []
    rows = sorted(_json(ns, "nexthop", "bucket", "show", "id", str(route[0]["nhid"])),
                  key=lambda r: int(r["bucket"]["index"]))
    gw_of_addr = {}
    for m in members(topo):
        for a in ((m.hub_side_v4, m.hub_side_v6) if role == "hub" else (m.edge_side_v4, m.edge_side_v6)):
            gw_of_addr[a] = m.role
    via = {int(n["id"]): gw_of_addr.get(str(n.get("gateway"))) for n in _json(ns, "nexthop", "show")}
    return [via.get(int(r["bucket"]["nhid"])) for r in rows]


def bucket_counts(table: list[str | None]) -> dict[str, int]:
    out: dict[str, int] = {}
    for g in table:
        if g is not None:
            out[g] = out.get(g, 0) + 1
    return out


def tables_agree(topo: Topology) -> dict[str, Any]:
    """Both routers' bucket tables, pair by pair: they must be equal for every flow to stay on one gateway."""
    out: dict[str, Any] = {}
    for server_prefix, client_prefix in PAIRED:
        hub, edge = buckets(topo, "hub", server_prefix), buckets(topo, EDGE_ROLE, client_prefix)
        out[f"{server_prefix}|{client_prefix}"] = {
            "agree": hub == edge, "hub": bucket_counts(hub), "edge": bucket_counts(edge),
            "differ": [i for i, (a, b) in enumerate(zip(hub, edge, strict=False)) if a != b]}
    return out


def router_view(topo: Topology, role: str) -> dict[str, Any]:
    """A router's BGP peers (state, prefixes received) and BFD sessions, as FRR reports them."""
    try:
        summary, bfd = frr.vtysh_json(topo, role, "show bgp summary json", "show bfd peers json")
    except (frr.FrrError, ValueError) as e:
        return {"error": str(e)}
    peers: dict[str, Any] = {}
    for afi in ("ipv4Unicast", "ipv6Unicast"):
        for addr, p in (summary.get(afi) or {}).get("peers", {}).items():
            peers[addr] = {"afi": afi, "state": p.get("state"), "prefixes_received": p.get("pfxRcd"),
                           "uptime_ms": p.get("peerUptimeMsec")}
    sessions = {str(b.get("peer")): {"status": b.get("status"), "uptime_s": b.get("uptime"),
                                     "downtime_s": b.get("downtime")} for b in bfd}
    return {"bgp": peers, "bfd": sessions}


def gateway_view(topo: Topology, role: str) -> dict[str, Any]:
    from ..gateway import client, socket_path

    m = next(x for x in members(topo) if x.role == role)
    out: dict[str, Any] = {"namespace": topo.ns(role), "frr_running": frr.running(topo, role),
                           "announcer": fabric.announcer_status(topo, role),
                           "addresses": {"hub_side": [m.hub_side_v4, m.hub_side_v6],
                                         "edge_side": [m.edge_side_v4, m.edge_side_v6]}}
    gw = client(socket_path(topo, role), timeout=2.0)
    try:
        h, c = gw.health(), gw.counters()
        out["daemon"] = {"status": h.status, "fail_open": h.fail_open, "revision": h.config_revision,
                         "flows_live": c.flows_live, "flows_total": c.flows_total}
        # The gateway's own view of its BGP sessions and BFD (the FRR beside it, read by the daemon).
        out["routing"] = {"problems": gw.json.routing().get("problems")}
    except ControlError as exc:
        # Not answering: None; answering with an error: its status, as before.
        out["daemon"] = None if exc.code in (UNREACHABLE, BAD_ANSWER) else {"status": f"http {exc.status}"}
    return out


def status(topo: Topology) -> dict[str, Any]:
    return {
        "gateways": {role: gateway_view(topo, role) for role in topo.gateway_roles},
        "routers": {role: router_view(topo, role) for role in fabric.ROUTER_ROLES},
        "controller": fabric.controller_status(topo),
        "buckets": tables_agree(topo),
    }


def wait_converged(topo: Topology, gateways: set[str], timeout: float = 40.0, stable_s: float = 1.5) -> None:
    """Until the controller sees exactly `gateways` up, each holding its share of the buckets, and has
    seen nothing else for `stable_s` (its status is written at least every 2 s)."""
    deadline = time.monotonic() + timeout
    since: float | None = None
    while True:
        st = fabric.controller_status(topo) or {}
        states, counts = st.get("states") or {}, st.get("counts") or {}
        up = {g for g, s in states.items() if s == "up"}
        share = fabric.BUCKETS // max(1, len(gateways))
        good = up == gateways and all(counts.get(g, 0) >= share for g in gateways) and bool(st.get("owner"))
        if good and since is None:
            since = time.monotonic()
        elif not good:
            since = None
        if since is not None and time.monotonic() - since >= stable_s:
            hub, edge = buckets(topo, "hub", "10.71.3.0/24"), buckets(topo, EDGE_ROLE, "10.71.1.0/24")
            if hub == edge == st["owner"]:
                return
        if time.monotonic() > deadline:
            # What each gateway, router and the controller said at the end: why it did not converge.
            try:
                seen = json.dumps(status(topo), default=str)[:6000]
            except Exception as e:  # the diagnosis must not hide the failure it explains
                seen = f"(status unavailable: {e})"
            raise fabric.ClusterError(f"cluster routing did not converge on {sorted(gateways)} in {timeout:.0f} s: "
                               f"states {states}, buckets {counts}; cluster status: {seen}")
        pid = procs.read_pid(topo.path("controller.pid"))
        if pid is None or not procs.alive(pid):
            tail = fabric.controller_log_tail(topo)
            raise fabric.ClusterError(f"the cluster controller is not running; log:\n{tail}")
        time.sleep(0.1)
