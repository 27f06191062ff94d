"""What the hub cluster's lab tests read and drive, for any cluster topology (lab/tests/test_cluster.py,
test_cluster_peer.py): checked downloads from the client (flowcheck.py), the routers' own multipath choice
(`ip route get`), a gateway's flow records and its guard's counters.

`ip route get` hashes IPv4 as the routers hash forwarded packets; for IPv6 it hashes without a packet, which
the kernel does differently (gateway/crates/perigee/src/gateway/cluster/hash.rs), so route_dev is IPv4 only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from ..gateway import client, socket_path
from ..topology import Topology
from . import fabric

CLIENT, SERVER, BULK = "10.71.1.10", "10.71.3.10", 5001
REPORT_S = 1.3  # workers report their flows to the daemon's master once a second
MATCH_S = 1.5  # a flow's record starts when its gateway accepts it: within a round trip of the client's connect


def own_prefix(ip: str) -> str:
    """How a flow record's address starts for `ip` ([v6]:port or v4:port)."""
    return f"[{ip}]:" if ":" in ip else f"{ip}:"


@dataclass(frozen=True)
class ClusterLab:
    topo: Topology

    def ns(self, role: str) -> str:
        return f"{self.topo.prefix}{role}"

    def _flowcheck_argv(self, server: str, args: tuple[str, ...]) -> list[str]:
        return ["ip", "netns", "exec", self.ns("client"), sys.executable, "-m", "satlab.cluster.flowcheck",
                "--server", server, "--port", str(BULK), *args]

    def flowcheck(self, *args: str, timeout: float = 120, server: str = SERVER) -> dict[str, Any]:
        """Checked downloads from the client (flowcheck.py's options); its JSON report."""
        p = subprocess.run(self._flowcheck_argv(server, args), capture_output=True, text=True, timeout=timeout)
        assert p.returncode == 0, p.stderr
        out: dict[str, Any] = json.loads(p.stdout)
        return out

    def flowcheck_bg(self, *args: str, server: str = SERVER) -> subprocess.Popen[str]:
        return subprocess.Popen(self._flowcheck_argv(server, args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    def route_dev(self, role: str, src: str, dst: str, sport: int, dport: int, iif: str) -> str:
        """The gateway the router `role` sends this IPv4 TCP packet to: the kernel's own multipath choice."""
        p = subprocess.run(["ip", "-n", self.ns(role), "-j", "route", "get", dst, "from", src, "iif", iif,
                            "ipproto", "tcp", "sport", str(sport), "dport", str(dport)],
                           capture_output=True, text=True, timeout=10, check=True)
        return str(json.loads(p.stdout)[0]["dev"])

    def hub_choice(self, sport: int, dport: int = BULK) -> str:
        """The gateway the hub router sends the client's flow to."""
        return self.route_dev("hub", CLIENT, SERVER, sport, dport, "sat0")

    def edge_choice(self, sport: int) -> str:
        """The gateway the edge router sends the server's answers to."""
        return self.route_dev("edge", SERVER, CLIENT, BULK, sport, "lan0")

    def flows_of(self, role: str, since: float, client_ip: str = CLIENT) -> dict[int, dict[str, Any]]:
        """client port -> the flow record at `role` (live and closed) of `client_ip`'s flows to the bulk server
        (flowcheck's) started after `since`. Call it REPORT_S after the flows of interest ended."""
        v = client(socket_path(self.topo, role), timeout=10).json.flows("all")
        own = own_prefix(client_ip)
        return {int(f["client"].rsplit(":", 1)[1]): f for f in v["flows"]
                if f["client"].startswith(own) and f["server"].endswith(f":{BULK}")
                and f["started_at"] >= since - 0.5}

    @staticmethod
    def record_of(held: dict[int, dict[str, Any]], flow: dict[str, Any]) -> dict[str, Any] | None:
        """The record in `held` (flows_of) of flowcheck's `flow`: the same client port and a start within
        MATCH_S of it. A port alone is not enough: a flow reset by a gateway's death frees its port at once,
        and a later flow to the same server may take it through another gateway."""
        rec = held.get(flow["sport"])
        return rec if rec is not None and abs(rec["started_at"] - flow["t_start"]) < MATCH_S else None

    def guard_counters(self, gateway: str) -> dict[str, int]:
        p = subprocess.run(["ip", "netns", "exec", self.ns(gateway), "nft", "-j", "list", "counters", "table",
                            "inet", fabric.GUARD_TABLE], capture_output=True, text=True, timeout=10, check=True)
        return {o["counter"]["name"]: int(o["counter"]["packets"]) for o in json.loads(p.stdout)["nftables"]
                if "counter" in o}


def finish(p: subprocess.Popen[str], timeout: float = 120) -> dict[str, Any]:
    """A background flowcheck's report, once it ends."""
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, err
    data: dict[str, Any] = json.loads(out)
    return data
