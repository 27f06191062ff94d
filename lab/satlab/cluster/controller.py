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
  its paths carry local preference 0 (the GRACEFUL_SHUTDOWN community), *down* otherwise (BFD or BGP
  lost it, or it prepends its AS because its splitter does not serve);
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
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

BUCKETS_DEFAULT = 64
# zebra adopts any kernel next-hop group a kernel route uses and re-installs its own copy when someone
# else changes it, undoing the controller's writes; it ignores notifications of objects carrying its
# own protocol (it takes them for echoes of its own), so ours carry it.
PROTO = "zebra"
KERNEL_IDLE_TIMER = 3600  # the group's own migration timer: never reached (no member is ever unbalanced)
IDLE_RECHECK_S = 5.0
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
    vtysh: str = "vtysh"

    @staticmethod
    def load(path: str) -> ControllerConf:
        raw = json.loads(open(path).read())
        routers = tuple(RouterConf(r["role"], r["ns"], r["vty_socket"], tuple(r["prefixes"]))
                        for r in raw.pop("routers"))
        gws = tuple(GatewayConf(**g) for g in raw.pop("gateways"))
        return ControllerConf(routers=routers, gateways=gws, **raw)


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


# --- what BGP says ---------------------------------------------------------------------------------

def bgp_routes(conf: ControllerConf, router: RouterConf) -> dict[str, list[dict[str, Any]]]:
    argv = [conf.vtysh, "--vty_socket", router.vty_socket, "-c", "show bgp ipv4 unicast json",
            "-c", "show bgp ipv6 unicast json"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    if p.returncode != 0:
        raise RuntimeError(f"vtysh on {router.ns}: {(p.stderr or p.stdout).strip()}")
    dec, i, text = json.JSONDecoder(), 0, p.stdout
    routes: dict[str, list[dict[str, Any]]] = {}
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return routes
        obj, i = dec.raw_decode(text, i)
        routes.update(obj.get("routes") or {})


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


def gateway_states(conf: ControllerConf, routes: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, str]:
    """up only when every cluster prefix is selected via it on both routers; draining when any path of
    it carries the drain mark (and none is lost); else down."""
    out = {}
    for g in conf.gateways:
        seen = []
        for r in conf.routers:
            for prefix in r.prefixes:
                addr = g.via[r.role]["v6" if is_v6(prefix) else "v4"]
                seen.append(path_state(routes[r.role].get(prefix, []), addr))
        if "down" in seen:
            out[g.name] = "down"
        elif "draining" in seen:
            out[g.name] = "draining"
        else:
            out[g.name] = "up"
    return out


# --- the table --------------------------------------------------------------------------------------

@dataclass
class Table:
    owner: list[str | None]
    built_at: float = field(default_factory=time.monotonic)

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
    t = Table(list(table.owner), table.built_at)
    for i, o in enumerate(t.owner):
        if o in up or o in draining:
            continue
        to = least_loaded(t, up) if up else (least_loaded(t, draining) if draining else None)
        if to != o:
            t.owner[i] = to
            moves.append((i, o, to, "down"))
    if not up:
        return (t if any(t.owner) else None), moves
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
    """One router's groups (one per family): bucket -> member object, generation A or B."""

    def __init__(self, conf: ControllerConf, router: RouterConf) -> None:
        self.conf, self.router = conf, router
        self.gen: dict[bool, int] = {}  # v6 -> generation 0/1
        self.member_of_bucket: dict[bool, dict[int, int]] = {}
        self.target: dict[bool, dict[int, str]] = {}  # member id -> gateway name

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

    def intact(self, v6: bool) -> bool:
        if v6 not in self.gen:
            return False
        _, gid = self.ids(v6, self.gen[v6])
        grp = ip_json(self.router.ns, "nexthop", "show", "id", str(gid))
        return bool(grp) and len(grp[0].get("group", [])) == self.conf.buckets

    def build(self, v6: bool, owner: list[str]) -> None:
        """A fresh group for the table, then the routes switched to it in one replace each."""
        old = self.gen.get(v6)
        gen = 0 if old is None else 1 - old
        first, gid = self.ids(v6, gen)
        self._delete_generation(v6, gen)
        lines = []
        for i in range(self.conf.buckets):
            via, dev = self._via(owner[i], v6)
            lines.append(f"nexthop add id {first + i} via {via} dev {dev} proto {PROTO}")
        members = "/".join(str(first + i) for i in range(self.conf.buckets))
        lines.append(f"nexthop add id {gid} group {members} type resilient buckets {self.conf.buckets} "
                     f"idle_timer {KERNEL_IDLE_TIMER} unbalanced_timer 0 proto {PROTO}")
        ip(self.router.ns, "-batch", "-", input_text="\n".join(lines) + "\n")
        # The kernel fills a fresh group's buckets one per member in an order of its own: read it, then
        # point each bucket's member at the bucket's owner.
        rows = ip_json(self.router.ns, "nexthop", "bucket", "show", "id", str(gid))
        mob = {int(r["bucket"]["index"]): int(r["bucket"]["nhid"]) for r in rows}
        targets = {first + i: owner[i] for i in range(self.conf.buckets)}
        fix = []
        for b, m in mob.items():
            if targets[m] != owner[b]:
                via, dev = self._via(owner[b], v6)
                fix.append(f"nexthop replace id {m} via {via} dev {dev} proto {PROTO}")
                targets[m] = owner[b]
        if fix:
            ip(self.router.ns, "-batch", "-", input_text="\n".join(fix) + "\n")
        fam = "-6" if v6 else "-4"
        for prefix in self.router.prefixes:
            if is_v6(prefix) == v6:
                ip(self.router.ns, fam, "route", "replace", prefix, "nhid", str(gid), "table",
                   str(self.conf.table), "proto", PROTO)
        self.gen[v6], self.member_of_bucket[v6], self.target[v6] = gen, mob, targets
        if old is not None:
            self._delete_generation(v6, old)

    def _delete_generation(self, v6: bool, gen: int) -> None:
        first, gid = self.ids(v6, gen)
        lines = [f"nexthop del id {gid}"] + [f"nexthop del id {first + i}" for i in range(self.conf.buckets)]
        ip(self.router.ns, "-force", "-batch", "-", input_text="\n".join(lines) + "\n", check=False)

    def kernel_owner(self, v6: bool) -> list[str | None]:
        """The table as the kernel has it: each bucket's member object's gateway."""
        if v6 not in self.gen:
            return []
        _, gid = self.ids(v6, self.gen[v6])
        rows = ip_json(self.router.ns, "nexthop", "bucket", "show", "id", str(gid))
        gw_of = {}
        for g in self.conf.gateways:
            gw_of[g.via[self.router.role]["v6" if v6 else "v4"]] = g.name
        via = {int(n["id"]): gw_of.get(str(n.get("gateway"))) for n in ip_json(self.router.ns, "nexthop", "show")}
        return [via.get(int(r["bucket"]["nhid"])) for r in sorted(rows, key=lambda r: int(r["bucket"]["index"]))]

    def apply(self, v6: bool, owner: list[str]) -> None:
        if not self.intact(v6):
            self.build(v6, owner)
            return
        fix = []
        for b, m in self.member_of_bucket[v6].items():
            if self.target[v6].get(m) != owner[b]:
                via, dev = self._via(owner[b], v6)
                fix.append(f"nexthop replace id {m} via {via} dev {dev} proto {PROTO}")
                self.target[v6][m] = owner[b]
        if fix:
            ip(self.router.ns, "-batch", "-", input_text="\n".join(fix) + "\n")
        if self.kernel_owner(v6) != owner:
            # Someone else changed our objects: build the table afresh rather than trust our notes.
            print(f"controller: {self.router.ns} group differs from the table, rebuilding", file=sys.stderr,
                  flush=True)
            self.build(v6, owner)

    def withdraw(self) -> None:
        for v6 in self.families():
            fam = "-6" if v6 else "-4"
            for prefix in self.router.prefixes:
                if is_v6(prefix) == v6:
                    ip(self.router.ns, fam, "route", "del", prefix, "table", str(self.conf.table), check=False)
            for gen in (0, 1):
                self._delete_generation(v6, gen)
            self.gen.pop(v6, None)

    def idle_times(self, v6: bool) -> dict[int, float]:
        if v6 not in self.gen:
            return {}
        _, gid = self.ids(v6, self.gen[v6])
        rows = ip_json(self.router.ns, "nexthop", "bucket", "show", "id", str(gid))
        return {int(r["bucket"]["index"]): float(r["bucket"].get("idle_time", 0.0)) for r in rows}


class Controller:
    def __init__(self, conf: ControllerConf) -> None:
        self.conf = conf
        self.table: Table | None = None
        self.groups = [RouterGroups(conf, r) for r in conf.routers]
        self.states: dict[str, str] = {}
        self.moves_total = 0
        self.log: list[dict[str, Any]] = []

    def ensure_rules(self) -> None:
        for r in self.conf.routers:
            for fam in ("-4", "-6"):
                if not any(x.get("priority") == self.conf.rule_pref for x in ip_json(r.ns, fam, "rule", "show")):
                    ip(r.ns, fam, "rule", "add", "pref", str(self.conf.rule_pref), "lookup", str(self.conf.table))

    def idle(self) -> list[bool]:
        """Per bucket: no packet for the idle timer on any router and family, or none since the build."""
        n = self.conf.buckets
        if self.table is None:
            return [True] * n
        age = time.monotonic() - self.table.built_at
        limit = min(self.conf.idle_timer_s, max(0.0, age - 0.5))
        out = [True] * n
        for g in self.groups:
            for v6 in g.families():
                times = g.idle_times(v6)
                for b in range(n):
                    if times.get(b, 0.0) < limit:
                        out[b] = False
        return out

    def reconcile(self) -> None:
        routes = {r.role: bgp_routes(self.conf, r) for r in self.conf.routers}
        self.states = gateway_states(self.conf, routes)
        order = [g.name for g in self.conf.gateways]
        table, moves = plan(self.table, self.states, order, self.idle(), self.conf.buckets)
        if table is None:
            if self.table is not None:
                for g in self.groups:
                    g.withdraw()
            self.table = None
        else:
            rebuilt = self.table is None
            self.table = table
            owner = [o or "" for o in table.owner]
            for g in self.groups:
                for v6 in g.families():
                    if rebuilt:
                        g.build(v6, owner)
                    else:
                        g.apply(v6, owner)
            if rebuilt:
                self.table.built_at = time.monotonic()
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
              "moves_total": self.moves_total, "recent": self.log[-10:]}
        tmp = self.conf.status_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(st, f)
        os.replace(tmp, self.conf.status_file)


def serve(conf: ControllerConf) -> None:
    ctl = Controller(conf)
    ctl.ensure_rules()
    # Only "something changed" matters (zebra rewrote a route after BGP or BFD, a link went down),
    # not what: the pipes are read raw, in whatever chunks arrive.
    monitors = [subprocess.Popen(["ip", "-n", r.ns, "-o", "monitor", "route", "nexthop", "link"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
                for r in conf.routers]
    fds = [m.stdout.fileno() for m in monitors if m.stdout is not None]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    next_check = 0.0
    try:
        while True:
            now = time.monotonic()
            if now >= next_check:
                try:
                    ctl.reconcile()
                except (RuntimeError, ValueError, OSError, KeyError, subprocess.TimeoutExpired) as e:
                    print(f"controller: {e}", file=sys.stderr, flush=True)
                next_check = now + (BUSY_RECHECK_S if ctl.unsettled() else IDLE_RECHECK_S)
            ready, _, _ = select.select(fds, [], [], max(0.0, next_check - time.monotonic()))
            if ready:
                while ready:
                    for fd in ready:
                        if not os.read(fd, 65536):
                            raise RuntimeError("ip monitor ended")
                    ready, _, _ = select.select(fds, [], [], DEBOUNCE_S)
                next_check = 0.0
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
