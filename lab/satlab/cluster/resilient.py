"""The routers' resilient mirror: BGP's equal-cost gateways as a kernel resilient next-hop group.

FRR 8.4's zebra installs BGP's equal-cost paths as a hash-threshold group (RFC 2992): adding or removing
one gateway there moves flows between the other gateways, which breaks split flows. zebra has resilient
groups only for PBR and sharpd (`nexthop-group ... resilient`), not for BGP routes. So this agent, one
per router, mirrors BGP's decision into a kernel resilient group (docs/cluster.md, *Resilient mirror*):

- for each cluster prefix, the gateways whose path BGP selected (best or multipath) are members with
  weight 255; gateways whose path carries local preference 0 (the GRACEFUL_SHUTDOWN community: drain) stay
  members with weight 1, so they get no bucket they do not already hold and lose each bucket once it has
  been idle for the idle timer; gateways without a usable path are removed, and the kernel hands their
  buckets to the others at once;
- members are ordered by gateway index and carry the same weights on both routers, so both routers,
  with the same hash seed and bucket count, map a flow's hash (the same both ways: symmetric L4 hash)
  to the same gateway;
- the group's routes live in their own table, looked up by an `ip rule` before main; zebra's own
  hash-threshold routes stay in main, unused while the mirror's exist.

It reconciles on every kernel route, nexthop or link change (what zebra does after any BGP or BFD change)
and every few seconds; each pass reads BGP's paths (vtysh) and changes only what differs.

Run as `python -m satlab.cluster.resilient CONFIG.json` inside the router's namespace.
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
from dataclasses import dataclass
from typing import Any

UP_WEIGHT = 255
DRAIN_WEIGHT = 1
IDLE_RECHECK_S = 5.0
DRAIN_RECHECK_S = 1.0
DEBOUNCE_S = 0.01


@dataclass(frozen=True)
class MemberConf:
    name: str
    index: int
    v4: str
    v6: str
    dev: str


@dataclass(frozen=True)
class MirrorConf:
    vty_socket: str
    members: tuple[MemberConf, ...]
    prefixes: tuple[str, ...]
    table: int
    rule_pref: int
    nh_base: int
    group_base: int
    buckets: int
    idle_timer_s: int
    status_file: str
    vtysh: str = "vtysh"

    @staticmethod
    def load(path: str) -> MirrorConf:
        raw = json.loads(open(path).read())
        ms = tuple(MemberConf(**m) for m in raw.pop("members"))
        return MirrorConf(members=ms, prefixes=tuple(raw.pop("prefixes")), **raw)

    def member_nh(self, m: MemberConf, v6: bool) -> int:
        return self.nh_base + 2 * m.index + (1 if v6 else 0)

    def group_id(self, prefix_index: int) -> int:
        return self.group_base + prefix_index


def is_v6(prefix: str) -> bool:
    return ":" in prefix


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
    if check and p.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {p.stderr.strip()}")
    return p


def _ip_json(*args: str) -> list[dict[str, Any]]:
    p = _ip("-j", *args, check=False)
    out = p.stdout.strip()
    if p.returncode != 0 or not out:  # e.g. a table that does not exist yet
        return []
    data: list[dict[str, Any]] = json.loads(out)
    return data


def bgp_tables(conf: MirrorConf) -> dict[str, list[dict[str, Any]]]:
    """prefix -> BGP paths (vtysh JSON of both address families)."""
    argv = [conf.vtysh, "--vty_socket", conf.vty_socket, "-c", "show bgp ipv4 unicast json",
            "-c", "show bgp ipv6 unicast json"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    if p.returncode != 0:
        raise RuntimeError(f"vtysh: {p.stderr.strip() or p.stdout.strip()}")
    dec, i, text = json.JSONDecoder(), 0, p.stdout
    routes: dict[str, list[dict[str, Any]]] = {}
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return routes
        obj, i = dec.raw_decode(text, i)
        for prefix, paths in (obj.get("routes") or {}).items():
            routes[prefix] = paths


def _path_nexthops(path: dict[str, Any]) -> set[str]:
    return {str(nh.get("ip")) for nh in path.get("nexthops", []) if nh.get("ip")}


def members_for(conf: MirrorConf, paths: list[dict[str, Any]], v6: bool) -> dict[str, int]:
    """member name -> weight for one prefix, from its BGP paths."""
    up, draining = set(), set()
    for path in paths:
        if not path.get("valid"):
            continue
        hops = _path_nexthops(path)
        for m in conf.members:
            if (m.v6 if v6 else m.v4) not in hops:
                continue
            if path.get("locPrf") == 0:
                draining.add(m.name)
            elif path.get("bestpath") or path.get("multipath"):
                up.add(m.name)
    weights: dict[str, int] = {}
    for m in conf.members:  # gateway order: the same on both routers
        if m.name in up:
            weights[m.name] = UP_WEIGHT
        elif m.name in draining:
            weights[m.name] = DRAIN_WEIGHT
    if weights and not up:
        weights = dict.fromkeys(weights, DRAIN_WEIGHT)  # all draining: keep them equal
    return weights


class Mirror:
    def __init__(self, conf: MirrorConf) -> None:
        self.conf = conf
        self.last: dict[str, Any] = {}

    def ensure_rules(self) -> None:
        for fam in ("-4", "-6"):
            rules = _ip_json(fam, "rule", "show")
            if not any(r.get("priority") == self.conf.rule_pref for r in rules):
                _ip(fam, "rule", "add", "pref", str(self.conf.rule_pref), "lookup", str(self.conf.table))

    def _existing_nexthops(self) -> dict[int, dict[str, Any]]:
        return {int(n["id"]): n for n in _ip_json("nexthop", "show")}

    def _ensure_member_nh(self, existing: dict[int, dict[str, Any]], m: MemberConf, v6: bool) -> bool:
        nh = self.conf.member_nh(m, v6)
        if nh in existing:
            return True
        p = _ip("nexthop", "add", "id", str(nh), "via", m.v6 if v6 else m.v4, "dev", m.dev, check=False)
        if p.returncode != 0:
            return False  # fails while the link is down: the member is down
        existing[nh] = {"id": nh}
        return True

    def reconcile(self) -> dict[str, Any]:
        conf = self.conf
        tables = bgp_tables(conf)
        existing = self._existing_nexthops()
        routes = {r.get("dst"): r for r in _ip_json("-4", "route", "show", "table", str(conf.table))}
        routes.update({r.get("dst"): r for r in _ip_json("-6", "route", "show", "table", str(conf.table))})
        by_name = {m.name: m for m in conf.members}
        status: dict[str, Any] = {"prefixes": {}, "at": time.time()}
        for i, prefix in enumerate(conf.prefixes):
            v6, gid = is_v6(prefix), conf.group_id(i)
            weights = members_for(conf, tables.get(prefix, []), v6)
            weights = {n: w for n, w in weights.items() if self._ensure_member_nh(existing, by_name[n], v6)}
            want = [(conf.member_nh(by_name[n], v6), w) for n, w in weights.items()]
            have = [(int(g["id"]), int(g.get("weight", 1))) for g in existing.get(gid, {}).get("group", [])]
            fam = "-6" if v6 else "-4"
            if not want:
                if prefix in routes:
                    _ip(fam, "route", "del", prefix, "table", str(conf.table), check=False)
                if gid in existing:
                    _ip("nexthop", "del", "id", str(gid), check=False)
            else:
                if want != have:
                    spec = "/".join(f"{nh},{w}" for nh, w in want)
                    verb = "replace" if gid in existing else "add"
                    _ip("nexthop", verb, "id", str(gid), "group", spec, "type", "resilient",
                        "buckets", str(conf.buckets), "idle_timer", str(conf.idle_timer_s),
                        "unbalanced_timer", "0")
                if routes.get(prefix, {}).get("nhid") != gid:
                    _ip(fam, "route", "replace", prefix, "nhid", str(gid), "table", str(conf.table))
            status["prefixes"][prefix] = {"group": gid, "members": weights}
        self.last = status
        tmp = conf.status_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(status, f)
        os.replace(tmp, conf.status_file)
        return status

    def draining(self) -> bool:
        return any(w == DRAIN_WEIGHT for p in self.last.get("prefixes", {}).values()
                   for w in p["members"].values())


def serve(conf: MirrorConf) -> None:
    mirror = Mirror(conf)
    mirror.ensure_rules()
    # Only "something changed" matters, not what: the pipe is read raw, in whatever chunks arrive.
    monitor = subprocess.Popen(["ip", "-o", "monitor", "route", "nexthop", "link"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, bufsize=0)
    assert monitor.stdout is not None
    fd = monitor.stdout.fileno()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    next_check = 0.0
    try:
        while True:
            now = time.monotonic()
            if now >= next_check:
                try:
                    mirror.reconcile()
                except (RuntimeError, ValueError, OSError, subprocess.TimeoutExpired) as e:
                    print(f"resilient mirror: {e}", file=sys.stderr, flush=True)
                next_check = now + (DRAIN_RECHECK_S if mirror.draining() else IDLE_RECHECK_S)
            ready, _, _ = select.select([fd], [], [], max(0.0, next_check - time.monotonic()))
            if ready:
                # A burst of changes (zebra replacing a route, our own writes) makes one pass.
                while ready:
                    if not os.read(fd, 65536):
                        raise RuntimeError("ip monitor ended")
                    ready, _, _ = select.select([fd], [], [], DEBOUNCE_S)
                next_check = 0.0
    finally:
        monitor.terminate()
        monitor.wait(timeout=5)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="satlab.cluster.resilient")
    ap.add_argument("config")
    a = ap.parse_args(argv)
    serve(MirrorConf.load(a.config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
