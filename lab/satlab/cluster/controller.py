"""The cluster controller: one bucket table, the same on both routers.

The kernel does the spreading: each router hashes a packet's addresses, protocol and ports with a
symmetric, seeded hash (`fib_multipath_hash_policy` 3, the same seed on both routers) and the route's
resilient next-hop group picks bucket `hash % 64`. A flow therefore lands in the same bucket on the hub
(client to server) and on the edge (server to client). Both directions reach the same gateway only if
the two routers send that bucket to the same gateway, and that is what this controller keeps true:

- each router has, per address family, a resilient group of 64 one-bucket members (next-hop objects);
  the controller never changes the group, only where each member points (`ip nexthop replace`), so the
  kernel never moves a bucket on its own and both routers hold exactly the controller's table;
- a gateway is *up* when both routers' BGP selected its paths for every cluster prefix, *draining* when
  its paths carry local preference 0 (the GRACEFUL_SHUTDOWN community), *down* otherwise (BFD is down:
  the link or the gateway failed, or its announcer shut BFD because its splitter does not serve; or BGP
  lost it);
- a down gateway's buckets go to the up gateways at once, evenly (its flows are lost anyway, and new
  ones must not wait); a draining gateway's buckets go one by one as each becomes idle; a gateway that
  comes back (or has fewer than its share) takes buckets only once they are idle: only new flows reach it.
  Idle means: no packet in the bucket on either router, in either family, for the idle timer, or never
  a packet since the table was built. Every decision depends only on the two routers' shared state, in
  a fixed order, so the table is a function of what both routers see.

The kernel's own resilient-group migration would decide per router, from that router's own bucket
activity and the moment it learned of a change, and the two tables drift apart (docs/cluster.md,
measured). A link going down makes the kernel delete the members through that link; the controller
then builds fresh groups from its table and switches the routes over atomically.

Run as `python -m satlab.cluster.controller CONFIG.json` (from any namespace: it uses `ip -n`).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from .tablepush import Pusher, Target

BUCKETS_DEFAULT = 64
# zebra learns every kernel next-hop object, and re-installs its own copy of one it counts as used
# when someone else changes or deletes it. Three things keep it from counting ours as used: the
# routes to our groups carry zebra's protocol (it ignores those notifications, taking them for echoes
# of its own writes); our members are `onlink`, so no next hop of zebra's own routes is equal to one
# of them (zebra reuses an equal kernel object for its routes); and nothing of ours is changed in
# place: generations are built whole and deleted group first.
PROTO = "zebra"
KERNEL_IDLE_TIMER = 3600  # the group's own migration timer: never reached (no member is ever unbalanced)
POLL_S = 0.1
IDLE_RECHECK_S = 2.0
BUSY_RECHECK_S = 0.5
DEBOUNCE_S = 0.01


@dataclass(frozen=True)
class GatewayConf:
    name: str
    index: int
    # per router role: {"v4": addr, "v6": addr, "dev": name}
    via: dict[str, dict[str, str]]


@dataclass(frozen=True)
class RouterConf:
    role: str
    ns: str
    vty_socket: str
    prefixes: tuple[str, ...]


@dataclass(frozen=True)
class ControllerConf:
    routers: tuple[RouterConf, ...]
    gateways: tuple[GatewayConf, ...]
    table: int
    rule_pref: int
    id_base: int
    buckets: int
    idle_timer_s: float
    status_file: str
    # With the peer path on: where the table goes besides the routers (tablepush.py).
    push: dict[str, Any] | None = None

    @staticmethod
    def load(path: str) -> ControllerConf:
        raw = json.loads(open(path).read())
        routers = tuple(RouterConf(r["role"], r["ns"], r["vty_socket"], tuple(r["prefixes"]))
                        for r in raw.pop("routers"))
        gws = tuple(GatewayConf(**g) for g in raw.pop("gateways"))
        return ControllerConf(routers=routers, gateways=gws, **raw)


def pusher(conf: ControllerConf) -> Pusher | None:
    p = conf.push
    if not p:
        return None
    # The seed as the router's kernel holds it (the lab set it; this reads what it hashes with).
    seed = subprocess.run(["ip", "netns", "exec", p["router_ns"], "sysctl", "-n", "net.ipv4.fib_multipath_hash_seed"],
                          capture_output=True, text=True, timeout=5, check=True).stdout.split()[0]
    return Pusher(router_ns=p["router_ns"], router_iif=p["router_iif"], seed=int(seed),
                  fields=int(p["fields"]), peer_port=int(p["peer_port"]),
                  members={g.name: g.via["hub"]["v4"] for g in conf.gateways},
                  targets=[Target(t["socket"], t["member"]) for t in p["targets"]])


def is_v6(prefix: str) -> bool:
    return ":" in prefix


def ip(ns: str, *args: str, check: bool = True, input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(["ip", "-n", ns, *args], capture_output=True, text=True, timeout=15, input=input_text)
    if check and p.returncode != 0:
        raise RuntimeError(f"ip -n {ns} {' '.join(args)[:120]}: {p.stderr.strip()[:300]}")
    return p


def ip_json(ns: str, *args: str) -> list[dict[str, Any]]:
    p = ip(ns, "-j", *args, check=False)
    out = p.stdout.strip()
    if p.returncode != 0 or not out:  # e.g. a table or group that does not exist (yet)
        return []
    data: list[dict[str, Any]] = json.loads(out)
    return data


# --- what BGP and BFD say --------------------------------------------------------------------------

class Vty:
    """A daemon's vty socket, kept open: FRR's vtysh protocol (a command and a NUL; the answer, then
    three NULs and a status byte). Far cheaper than a vtysh process per poll."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.sock: socket.socket | None = None

    def _connect(self) -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5.0)
        s.connect(self.path)
        self.sock = s
        self._send(s, "enable")
        return s

    @staticmethod
    def _send(s: socket.socket, command: str) -> str:
        s.sendall(command.encode() + b"\0")
        buf = b""
        while not (len(buf) >= 4 and buf[-4:-1] == b"\0\0\0"):
            data = s.recv(65536)
            if not data:
                raise OSError("vty closed")
            buf += data
        if buf[-1] != 0:
            raise RuntimeError(f"{command!r}: {buf[:-4].decode(errors='replace').strip()}")
        return buf[:-4].decode(errors="replace")

    def json(self, command: str) -> Any:
        for attempt in (0, 1):
            try:
                s = self.sock or self._connect()
                return json.loads(self._send(s, command))
            except OSError:
                self.close()
                if attempt:
                    raise
        return None

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def bgp_routes(bgpd: Vty) -> dict[str, list[dict[str, Any]]]:
    routes: dict[str, list[dict[str, Any]]] = dict((bgpd.json("show bgp ipv4 unicast json") or {}).get("routes") or {})
    return routes


def bfd_up(bfdd: Vty) -> set[str]:
    """Peers whose BFD session is up."""
    return {str(p.get("peer")) for p in (bfdd.json("show bfd peers json") or []) if p.get("status") == "up"}


def path_state(paths: list[dict[str, Any]], addr: str) -> str:
    """'up' (selected), 'draining' (local preference 0) or 'down' for the gateway at `addr`."""
    state = "down"
    for path in paths:
        if not path.get("valid") or addr not in {nh.get("ip") for nh in path.get("nexthops", [])}:
            continue
        if path.get("locPrf") == 0:
            return "draining"
        if path.get("bestpath") or path.get("multipath"):
            state = "up"
    return state


def gateway_states(conf: ControllerConf, routes: dict[str, dict[str, list[dict[str, Any]]]],
                   bfd: dict[str, set[str]]) -> dict[str, str]:
    """up when both routers have BFD up to it and BGP selected it for every cluster IPv4 prefix; draining
    when any of its paths carries the drain mark (and BFD is up); else down. BGP carries IPv4 only: a
    gateway's IPv6 prefixes are static (plan.py) and follow its IPv4 state."""
    out = {}
    for g in conf.gateways:
        seen = []
        for r in conf.routers:
            addr = g.via[r.role]["v4"]
            if addr not in bfd[r.role]:
                seen.append("down")
                continue
            seen += [path_state(routes[r.role].get(prefix, []), addr) for prefix in r.prefixes if not is_v6(prefix)]
        out[g.name] = "down" if "down" in seen else ("draining" if "draining" in seen else "up")
    return out


# --- the table --------------------------------------------------------------------------------------

@dataclass
class Table:
    owner: list[str | None]

    def counts(self, names: list[str]) -> dict[str, int]:
        c = dict.fromkeys(names, 0)
        for o in self.owner:
            if o in c:
                c[o] += 1
        return c


def least_loaded(table: Table, candidates: list[str]) -> str:
    c = table.counts(candidates)
    return min(candidates, key=lambda n: (c[n], candidates.index(n)))


def plan(table: Table | None, states: dict[str, str], order: list[str], idle: list[bool],
         buckets: int) -> tuple[Table | None, list[tuple[int, str | None, str | None, str]]]:
    """The next table and the moves that lead to it: (bucket, from, to, why). Deterministic."""
    up = [n for n in order if states.get(n) == "up"]
    draining = [n for n in order if states.get(n) == "draining"]
    moves: list[tuple[int, str | None, str | None, str]] = []
    if table is None:
        if not up:
            return None, moves
        t = Table([up[i % len(up)] for i in range(buckets)])
        return t, [(i, None, o, "initial") for i, o in enumerate(t.owner)]
    t = Table(list(table.owner))
    if not up and not draining:
        # No gateway serves: keep the table. The gateways still forward (unsplit), so the cluster fails
        # open as one gateway does; the kernel itself drops members whose link is gone.
        return t, moves
    for i, o in enumerate(t.owner):
        if o in up or o in draining:
            continue
        to = least_loaded(t, up) if up else (least_loaded(t, draining) if draining else None)
        if to != o:
            t.owner[i] = to
            moves.append((i, o, to, "down"))
    if not up:
        return t, moves
    for i, o in enumerate(t.owner):
        if o in draining and idle[i]:
            to = least_loaded(t, up)
            t.owner[i] = to
            moves.append((i, o, to, "drained"))
    floor_share = buckets // len(up)
    while True:
        c = t.counts(up)
        short = [n for n in up if c[n] < floor_share]
        if not short:
            break
        givers = sorted((n for n in up if c[n] > floor_share), key=lambda n: (-c[n], up.index(n)))
        moved = False
        for giver in givers:
            spare = [i for i, o in enumerate(t.owner) if o == giver and idle[i]]
            if spare:
                to = least_loaded(t, short)
                t.owner[spare[0]] = to
                moves.append((spare[0], giver, to, "rebalance"))
                moved = True
                break
        if not moved:
            break  # the remaining buckets are busy: they move once idle
    return t, moves


# --- programming the routers ---------------------------------------------------------------------

class RouterGroups:
    """One router's groups, one per family, each built whole: 64 member objects created pointing at
    their bucket's gateway, the group over them, the routes switched to it, the previous generation
    deleted. Nothing is ever changed in place: zebra learns every kernel next-hop object and, when one it
    counts as used (a member of a group) is changed by someone else, re-installs its own copy; objects
    that are only ever created and deleted it leaves as they are."""

    def __init__(self, conf: ControllerConf, router: RouterConf) -> None:
        self.conf, self.router = conf, router
        self.gen: dict[bool, int] = {}
        self.built_at: dict[bool, float] = {}
        # bucket -> member offset in a fresh group: how the kernel fills it (learned, then reused)
        self.fill: list[int] = [conf.buckets - 1 - b for b in range(conf.buckets)]

    def ids(self, v6: bool, gen: int) -> tuple[int, int]:
        """(first member id, group id) of a family's generation."""
        base = self.conf.id_base + (1000 if v6 else 0) + gen * 400
        return base, base + 300

    def _via(self, gw: str, v6: bool) -> tuple[str, str]:
        g = next(x for x in self.conf.gateways if x.name == gw)
        v = g.via[self.router.role]
        return v["v6" if v6 else "v4"], v["dev"]

    def families(self) -> list[bool]:
        return sorted({is_v6(p) for p in self.router.prefixes})

    def _group_id(self, v6: bool) -> int | None:
        return self.ids(v6, self.gen[v6])[1] if v6 in self.gen else None

    def kernel_owner(self, v6: bool) -> list[str | None]:
        """The table as the kernel has it: each bucket's member object's gateway ([] without a group)."""
        gid = self._group_id(v6)
        if gid is None:
            return []
        rows = ip_json(self.router.ns, "nexthop", "bucket", "show", "id", str(gid))
        gw_of = {g.via[self.router.role]["v6" if v6 else "v4"]: g.name for g in self.conf.gateways}
        via = {int(n["id"]): gw_of.get(str(n.get("gateway"))) for n in ip_json(self.router.ns, "nexthop", "show")}
        return [via.get(int(r["bucket"]["nhid"])) for r in sorted(rows, key=lambda r: int(r["bucket"]["index"]))]

    def bucket_members(self, gid: int) -> list[int]:
        rows = ip_json(self.router.ns, "nexthop", "bucket", "show", "id", str(gid))
        return [int(r["bucket"]["nhid"]) for r in sorted(rows, key=lambda r: int(r["bucket"]["index"]))]

    def program(self, v6: bool, owner: list[str]) -> bool:
        """Make the kernel hold `owner`; True when a new generation was built."""
        if self.kernel_owner(v6) == owner:
            return False
        for _attempt in range(2):
            old = self.gen.get(v6)
            gen = 0 if old is None else 1 - old
            first, gid = self.ids(v6, gen)
            self._delete_generation(v6, gen)
            member_target = {self.fill[b]: owner[b] for b in range(self.conf.buckets)}
            lines = []
            for j in range(self.conf.buckets):
                via, dev = self._via(member_target[j], v6)
                lines.append(f"nexthop add id {first + j} via {via} dev {dev} onlink proto {PROTO}")
            members = "/".join(str(first + j) for j in range(self.conf.buckets))
            lines.append(f"nexthop add id {gid} group {members} type resilient buckets {self.conf.buckets} "
                         f"idle_timer {KERNEL_IDLE_TIMER} unbalanced_timer 0 proto {PROTO}")
            ip(self.router.ns, "-batch", "-", input_text="\n".join(lines) + "\n")
            seen = [m - first for m in self.bucket_members(gid)]
            if seen != self.fill:
                # The kernel filled the buckets in another order: learn it and build again.
                self.fill = seen
                self._delete_generation(v6, gen)
                continue
            fam = "-6" if v6 else "-4"
            for prefix in self.router.prefixes:
                if is_v6(prefix) == v6:
                    ip(self.router.ns, fam, "route", "replace", prefix, "nhid", str(gid), "table",
                       str(self.conf.table), "proto", PROTO)
            self.gen[v6], self.built_at[v6] = gen, time.monotonic()
            if old is not None:
                self._delete_generation(v6, old)
            return True
        raise RuntimeError(f"{self.router.ns}: the kernel fills a fresh group differently each time")

    def _delete_generation(self, v6: bool, gen: int) -> None:
        first, gid = self.ids(v6, gen)
        lines = [f"nexthop del id {gid}"] + [f"nexthop del id {first + j}" for j in range(self.conf.buckets)]
        ip(self.router.ns, "-force", "-batch", "-", input_text="\n".join(lines) + "\n", check=False)

    def withdraw(self) -> None:
        for v6 in self.families():
            fam = "-6" if v6 else "-4"
            for prefix in self.router.prefixes:
                if is_v6(prefix) == v6:
                    ip(self.router.ns, fam, "route", "del", prefix, "table", str(self.conf.table), check=False)
            for gen in (0, 1):
                self._delete_generation(v6, gen)
            self.gen.pop(v6, None)

    def last_used(self, v6: bool, now: float) -> dict[int, float]:
        """bucket -> when it last carried a packet in this generation (absent: not since it was built)."""
        gid = self._group_id(v6)
        if gid is None:
            return {}
        age = now - self.built_at[v6]
        out = {}
        for r in ip_json(self.router.ns, "nexthop", "bucket", "show", "id", str(gid)):
            idle = float(r["bucket"].get("idle_time", 0.0))
            if idle < age - 0.2:
                out[int(r["bucket"]["index"])] = now - idle
        return out


class Controller:
    def __init__(self, conf: ControllerConf) -> None:
        self.conf = conf
        self.table: Table | None = None
        self.groups = [RouterGroups(conf, r) for r in conf.routers]
        self.states: dict[str, str] = {}
        self.used = [float("-inf")] * conf.buckets  # when each bucket last carried a packet (monotonic)
        self.builds = 0
        self.moves_total = 0
        self.bgpd = {r.role: Vty(os.path.join(r.vty_socket, "bgpd.vty")) for r in conf.routers}
        self.bfdd = {r.role: Vty(os.path.join(r.vty_socket, "bfdd.vty")) for r in conf.routers}
        self.log: list[dict[str, Any]] = []
        self.pusher = pusher(conf)
        self.pushed_at = float("-inf")

    def ensure_rules(self) -> None:
        for r in self.conf.routers:
            for fam in ("-4", "-6"):
                if not any(x.get("priority") == self.conf.rule_pref for x in ip_json(r.ns, fam, "rule", "show")):
                    ip(r.ns, fam, "rule", "add", "pref", str(self.conf.rule_pref), "lookup", str(self.conf.table))

    def observe(self) -> None:
        """Fold the kernel's per-bucket activity (every router and family) into the controller's own
        record, which outlives the generations the kernel's idle times restart with."""
        now = time.monotonic()
        for g in self.groups:
            for v6 in g.families():
                for b, t in g.last_used(v6, now).items():
                    if t > self.used[b]:
                        self.used[b] = t

    def idle(self) -> list[bool]:
        """Per bucket: no packet on any router, in any family, for the idle timer."""
        now = time.monotonic()
        return [now - t >= self.conf.idle_timer_s for t in self.used]

    def poll_states(self) -> dict[str, str]:
        routes = {r.role: bgp_routes(self.bgpd[r.role]) for r in self.conf.routers}
        bfd = {r.role: bfd_up(self.bfdd[r.role]) for r in self.conf.routers}
        return gateway_states(self.conf, routes, bfd)

    def reconcile(self, states: dict[str, str]) -> None:
        self.states = states
        order = [g.name for g in self.conf.gateways]
        self.observe()
        table, moves = plan(self.table, self.states, order, self.idle(), self.conf.buckets)
        if table is None:
            if self.table is not None:
                for g in self.groups:
                    g.withdraw()
            self.table = None
        else:
            self.table = table
            owner = [o or "" for o in table.owner]
            for g in self.groups:
                for v6 in g.families():
                    self.builds += g.program(v6, owner)
            if self.pusher is not None:
                # After the routers: a gateway told first would refuse flows the routers still send it.
                self.pusher.new_table(list(table.owner))
                now = time.monotonic()
                refresh = now - self.pushed_at >= IDLE_RECHECK_S
                self.pusher.push(refresh)
                if refresh:
                    self.pushed_at = now
        if moves:
            self.moves_total += len(moves)
            why: dict[str, int] = {}
            for m in moves:
                why[m[3]] = why.get(m[3], 0) + 1
            self.log = (self.log + [{"at": time.time(), "moves": len(moves), "why": why,
                                     "states": dict(self.states)}])[-50:]
        self.write_status()

    def unsettled(self) -> bool:
        if self.table is None:
            return False
        up = [n for n, s in self.states.items() if s == "up"]
        if any(s == "draining" for s in self.states.values()) and any(
                o for o in self.table.owner if self.states.get(o or "") == "draining"):
            return True
        if up:
            c = self.table.counts(up)
            return min(c.values()) < self.conf.buckets // len(up)
        return False

    def write_status(self) -> None:
        st = {"at": time.time(), "states": self.states, "buckets": self.conf.buckets,
              "owner": self.table.owner if self.table else None,
              "counts": self.table.counts([g.name for g in self.conf.gateways]) if self.table else {},
              "moves_total": self.moves_total, "builds": self.builds, "recent": self.log[-10:],
              "pushed": self.pusher.status() if self.pusher else None}
        tmp = self.conf.status_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(st, f)
        os.replace(tmp, self.conf.status_file)


def serve(conf: ControllerConf) -> None:
    """Poll BFD and BGP every 100 ms (a socket round trip each), reconcile on any change of a gateway's
    state, on any link or next-hop change the kernel reports, and every second (idle buckets move)."""
    ctl = Controller(conf)
    ctl.ensure_rules()
    monitors = [subprocess.Popen(["ip", "-n", r.ns, "-o", "monitor", "nexthop", "link"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
                for r in conf.routers]
    fds = [m.stdout.fileno() for m in monitors if m.stdout is not None]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    next_full, kernel_changed = 0.0, True
    try:
        while True:
            try:
                states = ctl.poll_states()
                now = time.monotonic()
                if kernel_changed or states != ctl.states or now >= next_full:
                    ctl.reconcile(states)
                    next_full = now + (BUSY_RECHECK_S if ctl.unsettled() else IDLE_RECHECK_S)
            except (RuntimeError, ValueError, OSError, KeyError, subprocess.TimeoutExpired) as e:
                print(f"controller: {e}", file=sys.stderr, flush=True)
            kernel_changed = False
            ready, _, _ = select.select(fds, [], [], POLL_S)
            while ready:
                for fd in ready:
                    if not os.read(fd, 65536):
                        raise RuntimeError("ip monitor ended")
                kernel_changed = True
                ready, _, _ = select.select(fds, [], [], DEBOUNCE_S)
    finally:
        for m in monitors:
            m.terminate()
            m.wait(timeout=5)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="satlab.cluster.controller")
    ap.add_argument("config")
    a = ap.parse_args(argv)
    serve(ControllerConf.load(a.config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
