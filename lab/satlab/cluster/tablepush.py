"""Pushing the controller's bucket table to the hub gateways (the peer path through the cluster,
docs/cluster.md).

With the peer path on, a terminal opens each new flow on a warm connection to the gateway that will
receive the server's answers, and each hub gateway refuses a peer flow that is not its own. Both need
the routers' table and hash: the controller sends the gateways the whole table (`PUT
/v1/cluster/table`) after each change, with flows whose gateway it asked the hub router's kernel for
(`ip route get`), so that a gateway whose hash disagrees with the routers' refuses the table instead
of aiming flows at the wrong gateway. Terminals fetch it from the gateways, across the satellite and
inside the peer path (a long poll), as they would from a real hub.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from perigee_control.client import GatewayClient, GatewayError

CHECKS = 24  # flows per table whose gateway the router's kernel names (the gateway needs 16 or more)
# IPv4 only: `ip -6 route get` hashes without a packet, which for IPv6 the kernel does differently from
# the forwarded packets the routers hash (hash.rs); the IPv6 hash of forwarded packets is checked
# against this kernel by gateway/crates/perigee/tests/multipath_hash_netns.rs, and it shares the seed,
# the fields and the buckets that these checks prove.
CLIENT_NET = "10.71.1."  # the lab's client subnet (satlab addressing)
SERVER_NET = "10.71.3."  # the server subnet
TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Target:
    """A control socket the table goes to; member None: a terminal."""

    socket: str
    member: str | None


@dataclass
class Pusher:
    router_ns: str  # the hub router: it hashes the terminal's packets toward the gateways
    router_iif: str  # its interface toward the satellite
    seed: int
    fields: int
    peer_port: int
    members: dict[str, str]  # gateway name -> its address toward the hub router (and its peer listener)
    targets: list[Target]
    epoch: int = 0
    owner: list[str | None] = field(default_factory=list)
    checks: list[dict[str, str]] = field(default_factory=list)
    acked: dict[str, int] = field(default_factory=dict)  # socket -> epoch it holds
    warned: set[str] = field(default_factory=set)

    def route_owner(self, src: str, dst: str) -> str | None:
        """The gateway the hub router's kernel sends the TCP flow src -> dst to."""
        s_ip, s_port = src.rsplit(":", 1)
        d_ip, d_port = dst.rsplit(":", 1)
        p = subprocess.run(["ip", "-n", self.router_ns, "-j", "route", "get", d_ip, "from", s_ip, "iif",
                            self.router_iif, "ipproto", "tcp", "sport", s_port, "dport", d_port],
                           capture_output=True, text=True, timeout=TIMEOUT_S)
        if p.returncode != 0:
            raise RuntimeError(f"ip route get {src} -> {dst}: {p.stderr.strip()}")
        via = {str(r.get("gateway")) for r in json.loads(p.stdout or "[]")}
        by_addr = {a: n for n, a in self.members.items()}
        names = [by_addr[v] for v in via if v in by_addr]
        return names[0] if names else None

    def new_table(self, owner: list[str | None]) -> None:
        """A table the routers now hold: a new epoch, with fresh checks from the router's kernel."""
        if owner == self.owner:
            return
        rng = random.Random()
        checks = []
        for _ in range(CHECKS):
            src = f"{CLIENT_NET}{rng.randint(2, 250)}:{rng.randint(1024, 65535)}"
            dst = f"{SERVER_NET}{rng.randint(1, 250)}:{rng.choice((80, 443, rng.randint(1, 65535)))}"
            member = self.route_owner(src, dst)
            if member is not None:
                checks.append({"src": src, "dst": dst, "member": member})
        self.owner, self.checks = list(owner), checks
        self.epoch = time.time_ns() // 1000  # newer than any a restarted controller pushed before

    def body(self, member: str | None) -> dict[str, Any]:
        return {"epoch": self.epoch, "member": member,
                "members": [{"name": n, "peer": f"{a}:{self.peer_port}"} for n, a in self.members.items()],
                "buckets": self.owner, "seed": self.seed, "fields": self.fields, "checks": self.checks}

    def push(self, refresh: bool) -> None:
        """Send the table where it is not held yet (`refresh`: everywhere, as a restarted daemon lost it)."""
        if not self.owner:
            return
        for t in self.targets:
            if not refresh and self.acked.get(t.socket) == self.epoch:
                continue
            try:
                GatewayClient(t.socket, timeout_s=TIMEOUT_S).call("PUT", "/v1/cluster/table", self.body(t.member))
                self.acked[t.socket] = self.epoch
                self.warned.discard(t.socket)
            except (GatewayError, OSError) as e:
                self.acked.pop(t.socket, None)
                if t.socket not in self.warned:  # a daemon not up yet, or stopped: said once
                    self.warned.add(t.socket)
                    print(f"controller: cluster table to {t.socket}: {e}", file=sys.stderr, flush=True)

    def status(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "checks": len(self.checks),
                "held": sorted(s for s, e in self.acked.items() if e == self.epoch)}
