"""The satlab command line: up, down, status, exec, link, fetch, bulk, udp, profiles, gateway-config."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from . import gateway, lab, linkctl, weather, webservices
from .cluster import fabric, frr
from .profiles import DEFAULT_PROFILE, PROFILES, Overrides, build_link
from .sysrun import ip
from .topology import CLUSTER_MAX_GATEWAYS, LINKS, Topology, resolve_prefix
from .units import fmt_rate, parse_rate, parse_size

DIRS = {"forward", "return", "both"}


def _need_root() -> None:
    if os.geteuid() != 0:
        raise lab.LabError("satlab needs root (namespaces, veth, ethtool)")


def _ns_name(topo: Topology, name: str) -> str:
    if name in topo.roles:
        return topo.ns(name)
    if name in topo.namespaces:
        return name
    raise lab.LabError(f"unknown namespace {name!r}: one of {', '.join(topo.roles)}")


def _gateways(v: str) -> int:
    n = int(v)
    if not 1 <= n <= CLUSTER_MAX_GATEWAYS:
        raise argparse.ArgumentTypeError(f"1..{CLUSTER_MAX_GATEWAYS}")
    return n


def _positive(v: str) -> int:
    n = int(v)
    if n < 1:
        raise argparse.ArgumentTypeError("at least 1")
    return n


def _onoff(v: str) -> bool:
    if v not in ("on", "off"):
        raise argparse.ArgumentTypeError("on or off")
    return v == "on"


def _add_link_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ber", type=float, help="bit error rate (e.g. 1e-6)")
    p.add_argument("--per", type=float, help="packet error rate")
    p.add_argument("--buffer", type=parse_size, help="bottleneck buffer, bytes (e.g. 128KiB, 1MB)")
    p.add_argument("--jitter", type=float, metavar="MS", help="delay jitter, ms")
    p.add_argument("--bod", type=_onoff, metavar="on|off", help="bandwidth on demand (DAMA)")
    p.add_argument("--bod-cra", type=parse_rate, metavar="RATE", help="static CRA")
    p.add_argument("--bod-max", type=parse_rate, metavar="RATE", help="RBDC maximum")
    p.add_argument("--bod-superframe", type=float, metavar="MS", help="superframe (request period)")
    p.add_argument("--bod-delay", type=float, metavar="MS", help="allocation delay")
    p.add_argument("--bod-backlog", type=float, metavar="MS",
                   help="backlog horizon: also request the rate that drains the queue within MS (0 = rate only)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="satlab", description="Perigee's satellite link lab")
    ap.add_argument("--prefix", help="namespace prefix (default sl-, or $SATLAB_PREFIX)")
    sub = ap.add_subparsers(dest="cmd", required=True)

    u = sub.add_parser("up", help="build the topology, start emulators and servers")
    u.add_argument("--profile", default=DEFAULT_PROFILE, choices=sorted(PROFILES))
    u.add_argument("--rtt", type=float, metavar="MS", help="base round-trip time (split evenly)")
    u.add_argument("--fwd-rate", type=parse_rate, metavar="RATE", help="forward (hub->terminal) rate")
    u.add_argument("--ret-rate", type=parse_rate, metavar="RATE", help="return (terminal->hub) rate")
    _add_link_flags(u)
    u.add_argument("--gateway", choices=("hub", "terminal", "both"), help="start the Perigee splitter")
    u.add_argument("--schedule", metavar="NAME|FILE",
                   help="start a link schedule once the lab is up (weather: " + ", ".join(weather.SCHEDULES) + ")")
    u.add_argument("--unconfigured", action="store_true",
                   help="start the splitter without a config (a new box: it intercepts nothing until one is PUT)")
    u.add_argument("--seed", type=int, default=1, help="emulator random seed (and the cluster's hash seed)")
    u.add_argument("--hub-gateways", type=_gateways, metavar="N",
                   help="a hub cluster: N gateway namespaces between a satellite-side and an internet-side "
                        "router, ECMP over BGP with BFD (docs/cluster.md); with --gateway hub each runs the splitter")
    u.add_argument("--hub-idle-timer", type=_positive, default=fabric.DEFAULT_IDLE_TIMER_S, metavar="S",
                   help="cluster: seconds a bucket must be idle before the routers move it to another gateway")
    u.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the first ping")

    sub.add_parser("down", help="remove everything 'up' made (idempotent)")
    st = sub.add_parser("status", help="namespaces, addresses, link parameters, counters, services")
    st.add_argument("--json", action="store_true")
    sub.add_parser("profiles", help="list the link profiles")
    gc = sub.add_parser("gateway-config", help="print the config satlab gives the gateway at ROLE (the lab's "
                                               "addresses, routes and resolver; no link tuning): for a gateway "
                                               "satlab does not start, such as the image test's container")
    gc.add_argument("role", choices=("hub", "terminal"))
    gc.add_argument("--cache", action="store_true", help="with the cache on (as SATLAB_GATEWAY_CACHE=1)")

    e = sub.add_parser("exec", help="run a command in a namespace: satlab exec client -- ping ...")
    e.add_argument("ns")
    e.add_argument("argv", nargs=argparse.REMAINDER)

    lk = sub.add_parser("link", help="link emulator parameters and counters")
    lsub = lk.add_subparsers(dest="action", required=True)
    for name in ("get", "set", "stats", "reset", "schedule"):
        p = lsub.add_parser(name)
        p.add_argument("--link", choices=[lnk.name for lnk in LINKS], default="sat")
        if name == "schedule":
            p.add_argument("schedule", nargs="?", metavar="NAME|FILE",
                           help=f"a named schedule ({', '.join(weather.SCHEDULES)}) or a JSON file (docs/lab.md)")
            p.add_argument("--stop", action="store_true",
                           help="stop the running schedule (parameters stay as they are)")
        if name in ("get", "stats"):
            p.add_argument("--json", action="store_true")
        if name == "set":
            p.add_argument("--dir", choices=sorted(DIRS), default="both")
            p.add_argument("--rate", type=parse_rate)
            p.add_argument("--delay-ms", type=float)
            p.add_argument("--gilbert", metavar="P_GB,P_BG,LOSS_GOOD,LOSS_BAD|off",
                           help="Gilbert-Elliott burst loss")
            _add_link_flags(p)

    cl = sub.add_parser("cluster", help="the hub cluster: status, and one gateway's crash, links, start, drain")
    csub = cl.add_subparsers(dest="action", required=True)
    cst = csub.add_parser("status", help="gateways, BGP/BFD as the routers see them, bucket tables")
    cst.add_argument("--json", action="store_true")
    for name, text in (("crash", "SIGKILL the gateway's daemon"), ("start", "start what of the gateway is stopped"),
                       ("drain", "drain the gateway (no new flows, let its flows finish), then stop it")):
        c = csub.add_parser(name, help=text)
        c.add_argument("gateway", help="gw1 .. gwN")
        if name == "drain":
            c.add_argument("--timeout", type=float, default=300.0)
    en = csub.add_parser("enroll", help="make a gateway a member of the API's fleet: management link, the TLS "
                                        "credentials the API issued (JSON file), daemon restarted with its TLS "
                                        "control listener; prints the address")
    en.add_argument("gateway")
    en.add_argument("--credentials", required=True, help="JSON with ca_pem, cert_pem, key_pem")
    lk2 = csub.add_parser("links", help="take both links of a gateway down or up")
    lk2.add_argument("gateway")
    lk2.add_argument("state", choices=("up", "down"))

    for tool in ("fetch", "bulk", "udp-send", "udp-recv", "mix"):
        t = sub.add_parser(tool, help=f"run the {tool} client in a namespace (NS then its own options; "
                                      f"'satlab {tool} NS -h' for them)")
        t.add_argument("ns")
        t.add_argument("rest", nargs=argparse.REMAINDER)
    return ap


# --- commands ------------------------------------------------------------------------------------

def cmd_up(topo: Topology, a: argparse.Namespace) -> int:
    _need_root()
    ov = Overrides(rtt_ms=a.rtt, fwd_rate=a.fwd_rate, ret_rate=a.ret_rate, ber=a.ber, per=a.per,
                   buffer=a.buffer, jitter_ms=a.jitter, bod=a.bod, bod_cra=a.bod_cra, bod_max=a.bod_max,
                   bod_superframe_ms=a.bod_superframe, bod_delay_ms=a.bod_delay, bod_backlog_ms=a.bod_backlog)
    fwd, ret = build_link(a.profile, ov)
    if a.unconfigured and not a.gateway:
        raise lab.LabError("--unconfigured needs --gateway")
    if a.hub_gateways:
        topo = Topology(topo.prefix, topo.run_root, topo.extra, a.hub_gateways)
    sched = weather.load(a.schedule) if a.schedule else None
    if sched is not None:
        weather.resolve(sched, fwd, ret)  # a bad schedule fails before anything is built
    lab.up(topo, a.profile, fwd, ret, a.gateway, seed=a.seed, timeout=a.timeout, idle_timer_s=a.hub_idle_timer,
           configured=not a.unconfigured)
    if sched is not None:
        start_schedule(topo, "sat", sched)
    print(f"satlab {topo.prefix}: up, profile {a.profile}: forward {fmt_rate(fwd['rate_bps'])}, "
          f"return {fmt_rate(ret['rate_bps'])}, RTT {fwd['delay_ms'] + ret['delay_ms']:g} ms"
          + (f", hub cluster of {a.hub_gateways}" if a.hub_gateways else "")
          + (f", gateway on {a.gateway}" if a.gateway else "")
          + (" (no config)" if a.unconfigured else ""))
    return 0


def cmd_cluster(topo: Topology, a: argparse.Namespace) -> int:
    from .cluster import members

    _need_root()
    _require_up(topo)
    if not topo.hub_gateways:
        raise lab.LabError(f"satlab '{topo.prefix}' is not a hub cluster (up --hub-gateways N)")
    try:
        if a.action == "status":
            s = members.describe(topo)
            print(json.dumps(s) if a.json else json.dumps(s, indent=2))
        elif a.action == "crash":
            members.crash(topo, a.gateway)
        elif a.action == "links":
            members.set_links(topo, a.gateway, a.state == "up")
        elif a.action == "start":
            members.start(topo, a.gateway)
        elif a.action == "enroll":
            creds = json.loads(Path(a.credentials).read_text())
            print(members.enroll(topo, a.gateway, creds))
        else:
            r = members.drain(topo, a.gateway, timeout=a.timeout)
            print(f"{a.gateway}: drained in {r.drained_s:.1f} s ({r.flows_at_start} flows at the start), "
                  f"stopped after {r.stopped_s:.1f} s")
    except (members.MemberError, fabric.ClusterError, frr.FrrError) as e:
        raise lab.LabError(str(e)) from e
    return 0


def _dir_view(link_name: str, reply: dict[str, Any]) -> dict[str, Any]:
    """Emulator a_to_b/b_to_a -> forward/return."""
    link = next(lnk for lnk in LINKS if lnk.name == link_name)
    rev = "b_to_a" if link.forward == "a_to_b" else "a_to_b"
    out = {"forward": reply.get(link.forward), "return": reply.get(rev)}
    if "uptime_s" in reply:
        out["uptime_s"] = reply["uptime_s"]
    return out


def _emu_dir(link_name: str, d: str) -> str:
    link = next(lnk for lnk in LINKS if lnk.name == link_name)
    if d == "both":
        return "both"
    rev = "b_to_a" if link.forward == "a_to_b" else "a_to_b"
    return link.forward if d == "forward" else rev


def _require_up(topo: Topology) -> dict[str, Any]:
    state = lab.load_state(topo)
    if state is None:
        raise lab.LabError(f"satlab '{topo.prefix}' is not up (run 'satlab up')")
    return state


def status(topo: Topology) -> dict[str, Any]:
    state = lab.load_state(topo)
    found = set(lab.existing_namespaces(topo))
    present = [ns for ns in topo.namespaces if ns in found]
    out: dict[str, Any] = {"prefix": topo.prefix, "up": state is not None, "run_dir": topo.run_dir,
                           "profile": (state or {}).get("profile"), "gateway": (state or {}).get("gateway"),
                           "namespaces": {}, "links": {}, "services": {}}
    for ns in present:
        addrs = []
        for itf in json.loads(ip(ns, "-j", "addr", "show").stdout or "[]"):
            if itf["ifname"] == "lo":
                continue
            addrs.append({"ifname": itf["ifname"], "state": itf.get("operstate"),
                          "addrs": [f"{x['local']}/{x['prefixlen']}" for x in itf.get("addr_info", [])
                                    if x.get("scope") == "global"]})
        out["namespaces"][ns] = addrs
    for link in LINKS:
        sock = lab.ctl_socket(topo, link.name)
        try:
            out["links"][link.name] = {"params": _dir_view(link.name, linkctl.get(sock)),
                                       "stats": _dir_view(link.name, linkctl.stats(sock))}
        except (linkctl.LinkControlError, OSError, ValueError) as e:
            out["links"][link.name] = {"error": str(e)}
    from . import procs
    for name, role, args in lab.SERVICES:
        pid = procs.read_pid(topo.path(f"{name}.pid"))
        out["services"][name] = {"namespace": topo.ns(role), "port": int(args[args.index("--port") + 1]),
                                 "pid": pid, "running": pid is not None and procs.alive(pid)}
    out["services"].update(webservices.status(topo))
    return out


def print_status(s: dict[str, Any]) -> None:
    print(f"satlab {s['prefix']}: {'up' if s['up'] else 'down'}"
          + (f", profile {s['profile']}" if s["profile"] else "")
          + (f", gateway {s['gateway']}" if s["gateway"] else ""))
    for ns, itfs in s["namespaces"].items():
        print(f"  {ns}: " + "; ".join(f"{i['ifname']} {' '.join(i['addrs']) or '-'}" for i in itfs))
    for name, info in s["links"].items():
        if "error" in info:
            print(f"  link {name}: {info['error']}")
            continue
        for d in ("forward", "return"):
            p, c = info["params"][d], info["stats"][d]
            bod = p.get("bod")
            print(f"  link {name} {d:7}: {fmt_rate(p['rate_bps'])}, delay {p['delay_ms']} ms, "
                  f"jitter {p['jitter_ms']} ms, buffer {p['buffer_bytes']} B, per {p['per']}, "
                  f"ber {p['ber']}" + (f", BoD cra {fmt_rate(bod['cra_bps'])}" if bod else "")
                  + f" | frames in/out {c.get('frames_in')}/{c.get('frames_out')}, "
                  f"queue {c.get('queue_bytes')} B, drops {c.get('drops')}")
    for name, sv in s["services"].items():
        print(f"  service {name}: {sv['namespace']} port {sv['port']} pid {sv['pid']} "
              f"{'running' if sv['running'] else 'NOT running'}")


def link_patch(a: argparse.Namespace) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    for key, val in (("rate_bps", a.rate), ("delay_ms", a.delay_ms), ("jitter_ms", a.jitter),
                     ("per", a.per), ("ber", a.ber), ("buffer_bytes", a.buffer)):
        if val is not None:
            patch[key] = val
    if a.gilbert:
        if a.gilbert == "off":
            patch["gilbert"] = None
        else:
            vals = [float(x) for x in a.gilbert.split(",")]
            if len(vals) != 4:
                raise lab.LabError("--gilbert takes P_GB,P_BG,LOSS_GOOD,LOSS_BAD or off")
            patch["gilbert"] = dict(zip(("p_gb", "p_bg", "loss_good", "loss_bad"), vals, strict=True))
    bod: dict[str, Any] = {}
    for key, val in (("cra_bps", a.bod_cra), ("rbdc_max_bps", a.bod_max),
                     ("superframe_ms", a.bod_superframe), ("allocation_delay_ms", a.bod_delay),
                     ("backlog_horizon_ms", a.bod_backlog)):
        if val is not None:
            bod[key] = val
    if a.bod is False:
        patch["bod"] = None
    elif a.bod or bod:
        patch["bod"] = bod
    if not patch:
        raise lab.LabError("nothing to set: give at least one of --rate --delay-ms --jitter --per --ber "
                           "--buffer --gilbert --bod ...")
    return patch


def start_schedule(topo: Topology, link_name: str, sched: dict[str, Any]) -> dict[str, Any]:
    """Resolve a schedule against the link's parameters now and hand it to its emulator."""
    sock = lab.ctl_socket(topo, link_name)
    view = _dir_view(link_name, linkctl.get(sock))
    link = next(lnk for lnk in LINKS if lnk.name == link_name)
    resolved = weather.resolve(sched, view["forward"], view["return"])
    linkctl.schedule(sock, weather.emulator_request(resolved, link.forward))
    return resolved


def cmd_link(topo: Topology, a: argparse.Namespace) -> int:
    state = _require_up(topo)
    sock = lab.ctl_socket(topo, a.link)
    if a.action == "get":
        view = _dir_view(a.link, linkctl.get(sock))
        print(json.dumps(view, indent=None if a.json else 2))
    elif a.action == "stats":
        view = _dir_view(a.link, linkctl.stats(sock))
        print(json.dumps(view, indent=None if a.json else 2))
    elif a.action == "reset":
        linkctl.reset_counters(sock)
    elif a.action == "schedule":
        if a.stop == bool(a.schedule):
            raise lab.LabError("link schedule: give NAME|FILE, or --stop")
        if a.stop:
            linkctl.schedule(sock, {"cmd": "schedule", "steps": []})
        else:
            resolved = start_schedule(topo, a.link, weather.load(a.schedule))
            print(f"satlab {topo.prefix}: schedule {resolved['name']} started on link {a.link}: "
                  f"{len(resolved['steps'])} steps" + (f", repeating every {resolved['repeat_ms'] / 1000:g} s"
                                                       if resolved["repeat_ms"] else ""))
    else:
        linkctl.set_params(sock, _emu_dir(a.link, a.dir), link_patch(a))
        if a.link == "sat":  # keep state.json's record of the parameters in step
            view = _dir_view(a.link, linkctl.get(sock))
            state["forward"], state["return"] = view["forward"], view["return"]
            lab.save_state(topo, state)
    return 0


def cmd_client(topo: Topology, a: argparse.Namespace) -> int:
    ns = _ns_name(topo, a.ns)
    argv = ["ip", "netns", "exec", ns, sys.executable, "-m", "satlab.clients", a.cmd, *a.rest]
    os.execvp(argv[0], argv)


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    if a.cmd == "gateway-config":  # no lab needed: what satlab.gateway would configure
        print(json.dumps(gateway.default_config(a.role, cache=a.cache), indent=2))
        return 0
    try:
        topo = Topology(resolve_prefix(a.prefix))
        if a.cmd != "up":
            topo = lab.current(topo)
        if a.cmd == "cluster":
            return cmd_cluster(topo, a)
        if a.cmd == "up":
            return cmd_up(topo, a)
        if a.cmd == "down":
            _need_root()
            lab.down(topo)
            print(f"satlab {topo.prefix}: down")
            return 0
        if a.cmd == "status":
            s = status(topo)
            if a.json:
                print(json.dumps(s))
            else:
                print_status(s)
            return 0
        if a.cmd == "profiles":
            for p in PROFILES.values():
                print(f"{p.name:12} {p.summary}\n{'':12} source: {p.source}")
            print("\nlink schedules (up --schedule, link schedule):")
            for sc in weather.SCHEDULES.values():
                print(f"{sc['name']:12} {sc['summary']}")
            return 0
        if a.cmd == "exec":
            cmd = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
            if not cmd:
                raise lab.LabError("usage: satlab exec NS -- CMD [ARGS...]")
            ns = _ns_name(topo, a.ns)
            if ns not in lab.existing_namespaces(topo):
                raise lab.LabError(f"namespace {ns} does not exist (is satlab '{topo.prefix}' up?)")
            os.execvp("ip", ["ip", "netns", "exec", ns, *cmd])
        if a.cmd == "link":
            return cmd_link(topo, a)
        return cmd_client(topo, a)
    except (lab.LabError, linkctl.LinkControlError, weather.ScheduleError, ValueError) as e:
        print(f"satlab: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
