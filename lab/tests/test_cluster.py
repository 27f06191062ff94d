"""The hub cluster (`satlab up --hub-gateways 3 --gateway hub`, geo-hts), namespace prefix pc-:
the hash is symmetric on this kernel, flows are pinned both ways, a gateway's failure (SIGKILL of its
daemon, its links down, BFD silence) moves only its own flows and lets new flows reach the others within
1 s, a gateway that returns gets only new flows, and a drain breaks nothing; each gateway's GET /v1/routing
reports its two BGP sessions and their BFD state as its FRR sees them, a fault included (docs/cluster.md)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import satlab

from satlab.cluster import fabric, labcheck, members, state
from satlab.cluster.plan import member
from satlab.gateway import client, socket_path
from satlab.testing import HUNG_S, cannot_run
from satlab.topology import Topology

PREFIX = "pc-"
TOPO = Topology(PREFIX, hub_gateways=3)
GATEWAYS = ("gw1", "gw2", "gw3")
CLIENT, SERVER, BULK, REPORT_S = labcheck.CLIENT, labcheck.SERVER, labcheck.BULK, labcheck.REPORT_S
# The routers' bucket idle timer in this lab: short, so returns and drains finish quickly, yet longer than a
# live GEO flow stays quiet under load (a segment dropped from a full 1-BDP buffer waits an RTO of 1 s on
# top of an RTT up to 1.2 s; at 2 s, a drain moved two busy buckets and reset their new flows).
IDLE_S = 5


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    if os.geteuid() != 0:
        cannot_run("needs root (network namespaces)")
    if fabric.frr.available():
        cannot_run(f"FRR missing (scripts/apt/lab.txt): {fabric.frr.available()}")
    satlab("down", prefix=PREFIX, check=False)
    satlab("up", "--profile", "geo-hts", "--hub-gateways", "3", "--gateway", "hub",
           "--hub-idle-timer", str(IDLE_S), prefix=PREFIX, timeout=240)
    try:
        yield
    finally:
        satlab("down", prefix=PREFIX, check=False, timeout=120)


LAB = labcheck.ClusterLab(TOPO)
flowcheck, flowcheck_bg, finish = LAB.flowcheck, LAB.flowcheck_bg, labcheck.finish
route_dev, hub_choice, edge_choice = LAB.route_dev, LAB.hub_choice, LAB.edge_choice
flows_of, guard_counters = LAB.flows_of, LAB.guard_counters


def ports_to(gateway: str, count: int, start: int) -> list[int]:
    """Client ports whose flows the hub sends to `gateway` now."""
    out, port = [], start
    while len(out) < count:
        if hub_choice(port) == gateway:
            out.append(port)
        port += 1
    return out


def tables() -> tuple[list[str | None], list[str | None]]:
    return state.buckets(TOPO, "hub", "10.71.3.0/24"), state.buckets(TOPO, "edge", "10.71.1.0/24")


def wait_for(cond: Any, timeout: float, what: str, poll: float = 0.02) -> float:
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(poll)
    return time.monotonic() - t0


def all_serving() -> None:
    for g in GATEWAYS:
        members.start(TOPO, g)
    state.wait_converged(TOPO, set(GATEWAYS), timeout=60)


# --- symmetry ---------------------------------------------------------------------------------------

def test_hash_is_symmetric_and_both_routers_hold_one_table(cluster: None) -> None:
    hub, edge = tables()
    assert len(hub) == fabric.BUCKETS and hub == edge, "the routers' bucket tables differ"
    assert set(hub) == set(GATEWAYS)
    rng = random.Random(7)
    seen = set()
    for _ in range(150):
        sport, dport = rng.randint(1024, 65535), rng.choice([80, 443, 5001, rng.randint(1, 65535)])
        client, server = f"10.71.1.{rng.randint(2, 254)}", f"10.71.3.{rng.randint(2, 254)}"
        there = route_dev("hub", client, server, sport, dport, "sat0")
        back = route_dev("edge", server, client, dport, sport, "lan0")
        assert there == back, f"{client}:{sport} -> {server}:{dport}: hub {there}, edge {back}"
        seen.add(there)
    assert seen == set(GATEWAYS)


# --- pinning ----------------------------------------------------------------------------------------

# --- what each gateway's FRR reports ---------------------------------------------------------------

def routing(gateway: str) -> dict[str, Any]:
    return client(socket_path(TOPO, gateway), timeout=10).json.routing()


def sessions_down(gateway: str) -> bool:
    """Both of its BGP sessions out of Established and both BFD sessions down."""
    ns = routing(gateway)["neighbors"]
    return len(ns) == 2 and all(n["state"] != "Established" and (n["bfd"] or {}).get("status") == "down" for n in ns)


def test_each_gateway_reports_its_bgp_sessions_and_bfd_state(cluster: None) -> None:
    state.wait_converged(TOPO, set(GATEWAYS), timeout=60)
    for k, g in enumerate(GATEWAYS, start=1):
        r = routing(g)
        assert r["available"] is True and r["reason"] is None and r["problems"] == [], r
        m = member(k)
        by_peer = {n["address"]: n for n in r["neighbors"]}
        assert set(by_peer) == {m.hub_v4, m.edge_v4}, r
        for peer, router, asn in ((m.hub_v4, "hub", 65001), (m.edge_v4, "edge", 65002)):
            n = by_peer[peer]
            assert (n["state"], n["admin_shutdown"], n["hostname"], n["remote_as"]) == \
                ("Established", False, f"{PREFIX}{router}", asn), n
            assert n["prefixes_received"] >= 1 and n["uptime_s"] is not None, n
            assert n["bfd"]["status"] == "up" and n["bfd"]["detect_multiplier"] == 4, n
    # A fault the report must show: gw3's links go down; its BFD sessions time out (0.8 s) and bgpd drops both
    # sessions. Then its own report says so, one problem per session and BFD session.
    members.set_links(TOPO, "gw3", False)
    try:
        took = wait_for(lambda: sessions_down("gw3"), HUNG_S, "gw3's sessions reported down", poll=0.1)
        r = routing("gw3")
        assert len(r["problems"]) == 4, r["problems"]
        assert all(n["bfd"]["diagnostic"] == "control detection time expired" for n in r["neighbors"]), r
        print(f"gw3's report showed its sessions down {took:.1f} s after its links went down")
        assert routing("gw2")["problems"] == []
    finally:
        members.set_links(TOPO, "gw3", True)
    wait_for(lambda: routing("gw3")["problems"] == [], HUNG_S, "gw3's sessions Established again", poll=0.2)
    state.wait_converged(TOPO, set(GATEWAYS), timeout=60)


def moves_total() -> int:
    return int((fabric.controller_status(TOPO) or {})["moves_total"])


def test_flows_are_pinned_both_ways(cluster: None) -> None:
    """1,000 flows at once fill each gateway's shaper FIFO (16 MB toward a 50 Mbit/s carrier): BFD must
    still hold (its hellos skip that queue), so no bucket moves and no flow is reset mid-run."""
    before = {g: guard_counters(g) for g in GATEWAYS}
    moves = moves_total()
    t0 = time.time()
    run = flowcheck("--flows", "1000", "--size", "16384")
    assert run["summary"] == {"ok": 1000}, run["summary"]
    assert moves_total() == moves, "the controller moved buckets while every gateway was serving"
    time.sleep(REPORT_S)
    owners: dict[int, list[str]] = {}
    for g in GATEWAYS:
        for port, f in flows_of(g, t0).items():
            owners.setdefault(port, []).append(g)
            assert f["bytes_down"] == 16384 and f["end_reason"] in ("closed", None), f
    per_gateway = {g: 0 for g in GATEWAYS}
    for rec in run["flows"]:
        port = rec["sport"]
        held = owners.get(port, [])
        assert len(held) == 1, f"flow from port {port} is in the tables of {held}"
        assert held[0] == hub_choice(port) == edge_choice(port)
        per_gateway[held[0]] += 1
    assert all(n > 0 for n in per_gateway.values()), per_gateway
    # No packet of these flows was forwarded by a gateway that does not hold it, nor reset as foreign.
    assert {g: guard_counters(g) for g in GATEWAYS} == before


# --- failover ---------------------------------------------------------------------------------------

def one_way_return_s() -> float:
    """The satellite's terminal -> hub delay: how long a client's SYN takes to reach the cluster."""
    with open(TOPO.path("state.json")) as f:
        return float(json.load(f)["return"]["delay_ms"]) / 1000


def _failover(fault: Any, repair: Any, victim: str) -> None:
    survivors = [g for g in GATEWAYS if g != victim]
    long_ports = {g: ports_to(g, 12, 20000 + 1000 * GATEWAYS.index(g)) for g in GATEWAYS}
    probe_ports = ports_to(victim, 40, 30000)
    longs = flowcheck_bg("--ports", ",".join(str(p) for ps in long_ports.values() for p in ps),
                         "--size", "1500000", "--stall", "15")
    time.sleep(3.0)
    t_fault = time.time()
    probes = flowcheck_bg("--ports", ",".join(map(str, probe_ports)), "--size", "2000",
                          "--start-interval", "0.05", "--stall", "10")
    fault()
    long_run, probe_run = finish(longs), finish(probes)
    time.sleep(REPORT_S)
    by_port = {r["sport"]: r for r in long_run["flows"]}
    # The survivors' flows are untouched.
    for g in survivors:
        assert [by_port[p]["result"] for p in long_ports[g]] == ["ok"] * 12, g
    # The victim's flows end cleanly: reset (or cut short), never a hang (flowcheck says "stalled").
    for p in long_ports[victim]:
        r = by_port[p]
        assert r["result"] in ("reset", "short"), r
        assert r["t_end"] - t_fault < HUNG_S, r
    # New flows of the victim's buckets (a probe every 50 ms): a survivor serves them. When the first one it
    # served reached the cluster (its SYN arrived at the hub: sent + the return link's one-way delay) is reported:
    # about the BFD detection time (0.8 s), the machine's figure beside it.
    held: set[int] = set()
    for g in survivors:
        held.update(p for p in flows_of(g, t_fault) if p in probe_ports)
    timeline = [(round(r["t_start"] - t_fault, 2), r["result"], r["sport"] in held) for r in probe_run["flows"]]
    served = sorted(r["t_start"] for r in probe_run["flows"] if r["result"] == "ok" and r["sport"] in held)
    assert served, timeline
    reached = served[0] + one_way_return_s() - t_fault
    print(f"first new flow served by a survivor reached it {reached:.2f} s after the fault: {timeline}")
    assert not any(r["result"] == "stalled" for r in probe_run["flows"])
    hub, edge = tables()
    assert hub == edge and victim not in hub
    # It returns: survivors' flows still untouched, only new flows (idle buckets) go to it.
    busy = flowcheck_bg("--ports", ",".join(str(p) for g in survivors for p in long_ports[g]),
                        "--size", "1500000", "--stall", "15")
    time.sleep(2.0)
    repair()
    wait_for(lambda: victim in tables()[0], HUNG_S, f"{victim} back in the tables")
    assert [r["result"] for r in finish(busy)["flows"]] == ["ok"] * 24
    state.wait_converged(TOPO, set(GATEWAYS), timeout=60)
    hub, edge = tables()
    assert hub == edge
    t_new = time.time()
    again = flowcheck("--flows", "60", "--size", "4000")
    assert again["summary"] == {"ok": 60}
    time.sleep(REPORT_S)
    assert flows_of(victim, t_new), f"no new flow reached {victim} after its return"


def test_sigkill_of_a_gateway_daemon(cluster: None) -> None:
    _failover(lambda: members.crash(TOPO, "gw2"), lambda: members.start(TOPO, "gw2"),
              "gw2")


def test_links_of_a_gateway_down(cluster: None) -> None:
    all_serving()
    _failover(lambda: members.set_links(TOPO, "gw3", False), lambda: members.set_links(TOPO, "gw3", True), "gw3")


def test_a_gateway_silent_on_bfd_is_withdrawn(cluster: None) -> None:
    all_serving()
    ns = f"{PREFIX}gw1"
    freeze = ("table inet pc_freeze {\n chain in { type filter hook prerouting priority -400; policy drop; }\n"
              " chain out { type filter hook output priority -400; policy drop; }\n}\n")
    t0 = time.monotonic()
    subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=freeze, text=True, check=True)
    try:
        wait_for(lambda: "gw1" not in tables()[0] and "gw1" not in tables()[1], HUNG_S, "gw1 withdrawn")
        took = time.monotonic() - t0
        print(f"gw1 withdrawn {took:.2f} s after it fell silent (BFD detection time 0.8 s)")
    finally:
        subprocess.run(["ip", "netns", "exec", ns, "nft", "delete", "table", "inet", "pc_freeze"], check=True)
    wait_for(lambda: "gw1" in tables()[0], HUNG_S, "gw1 back")
    state.wait_converged(TOPO, set(GATEWAYS), timeout=60)


# --- drain ------------------------------------------------------------------------------------------

def test_drain_breaks_nothing(cluster: None) -> None:
    all_serving()
    ports = ports_to("gw1", 10, 40000) + ports_to("gw2", 10, 41000)
    longs = flowcheck_bg("--ports", ",".join(map(str, ports)), "--size", "800000", "--stall", "15")
    time.sleep(2.0)
    news: list[subprocess.Popen[str]] = []
    result: dict[str, Any] = {}

    def drain() -> None:
        result["drain"] = members.drain(TOPO, "gw1", timeout=90)

    th = threading.Thread(target=drain)
    th.start()
    for _ in range(5):  # new flows while it drains
        news.append(flowcheck_bg("--flows", "20", "--size", "20000"))
        time.sleep(1.0)
    th.join(timeout=120)
    assert "drain" in result, "drain did not finish"
    assert finish(longs)["summary"] == {"ok": 20}
    for p in news:
        assert finish(p)["summary"] == {"ok": 20}
    hub, edge = tables()
    assert hub == edge and "gw1" not in hub
    members.start(TOPO, "gw1")
    state.wait_converged(TOPO, set(GATEWAYS), timeout=60)
