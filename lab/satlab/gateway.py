"""satlab's `--gateway` hook: run Perigee's splitter daemon in the hub and/or terminal namespace.

`start(topo, where)` writes a default config per gateway (accelerate everything from the client
LAN, IPsec bypass on, satellite routes per DEVELOPERS.md addressing, satellite-leg buffers, pacing
and Hybla's cwnd ceiling sized from the running link profile: `link_tuning`), starts
`bin/perigee gateway run` inside the namespace in the background with a pidfile, and waits until
`/v1/health` answers on `<run_dir>/gw-<ns>.sock`. `stop(topo[, where])` stops what start started.

`SATLAB_PERIGEE=/path/to/perigee` starts that binary instead of the repository's `bin/perigee`.

The Squid cache is off by default; `start(..., cache=True)` or `SATLAB_GATEWAY_CACHE=1` in the
environment (e.g. `SATLAB_GATEWAY_CACHE=1 satlab up --gateway terminal`) enables it with a small
store (CACHE_CONFIG). Each gateway's Squid keeps its files under `<run_dir>/squid-<ns>/` and uses
the service name `perigee<ns without - and _>`, so gateways in several namespaces never share them.

DNS: the terminal runs the gateway's caching resolver (`dns.enabled`, docs/dns.md), forwarding to
the lab's DNS server behind the satellite (LAB_RESOLVER, in the server namespace); the hub names
the same server as `dns.upstream`, which its Squid resolves through when its cache is on. Each
resolver keeps its files under `<run_dir>/dns-<ns>/`.

With `--gateway both` the peer path is on (docs/splitter.md, *The peer path*): the terminal keeps
warm TLS connections to the hub's peer port (PEER_PORT) and new flows start on them. Each gateway's
identity is made in `<run_dir>/peer-<ns>/` (`perigee identity init`, before the daemons start); the
hub enrolls the terminal's fingerprint for the lab's client prefixes (`peer.terminals`, as the API
does when it enrolls a terminal) and the terminal pins the hub's (`peer.hub_fingerprints`). The hub's
listener binds its satellite addresses (the default).

Only `topo.ns(role)` and `topo.path(name)` of satlab's Topology are used (see the Protocol below).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Protocol

from perigee_control.bypass import builtin_bypass_json
from perigee_control.client import GatewayClient
from perigee_control.client import GatewayError as ControlError
from perigee_control.config import Hybla, Satellite
from perigee_control.limits import bound, default, extension

from . import gwsupervise

REPO = Path(__file__).resolve().parents[2]
# SATLAB_PERIGEE runs another build of the daemon (e.g. to measure a baseline beside this one).
PERIGEE = os.environ.get("SATLAB_PERIGEE") or str(REPO / "bin" / "perigee")
# `both`: the hub first, so its peer listener is up when the terminal's pool connects.
WHERE = {"hub": ("hub",), "terminal": ("terminal",), "both": ("hub", "terminal")}
CLIENT_SUBNETS = ["10.71.1.0/24", "fd71:1::/64"]
SITE_NAME = "site-1"
# Satellite routes: the far side of the satellite link, as seen from each gateway.
SAT_ROUTES = {
    "terminal": [
        {"dst": "10.71.3.0/24", "via": "10.71.2.2"},
        {"dst": "fd71:3::/64", "via": "fd71:2::2"},
        {"dst": "10.71.4.0/24", "via": "10.71.2.2"},
        {"dst": "fd71:4::/64", "via": "fd71:2::2"},
    ],
    "hub": [
        {"dst": "10.71.1.0/24", "via": "10.71.2.1"},
        {"dst": "fd71:1::/64", "via": "fd71:2::1"},
    ],
}


# The peer path between the two gateways of `--gateway both` (satlab addressing, DEVELOPERS.md).
PEER_PORT = 7072
PEER_HUB = "10.71.2.2"
PEER_POOL_SIZE = 8


class PeerPins(dict[str, str]):
    """Each gateway's identity fingerprint by role for `--gateway both`: "terminal", and "hub" or, in a hub
    cluster, "gw1".."gwN"."""

    def hub_roles(self) -> list[str]:
        return sorted((r for r in self if r != "terminal"), key=lambda r: (len(r), r))


def peer_hub_address(pins: PeerPins) -> str:
    """Where the terminal's first pool goes: the hub, or a cluster's first gateway (the controller's table
    names the others, docs/cluster.md)."""
    first = pins.hub_roles()[0]
    if first == "hub":
        return PEER_HUB
    from .cluster.plan import member

    return member(int(first[2:])).hub_side_v4


def peer_section(role: str, pins: PeerPins | None) -> dict[str, Any]:
    """The `peer` config of a gateway; pins None: the peer path is off (one gateway only)."""
    if pins is None:
        return {"enabled": False, "port": PEER_PORT, "hub": "", "hub_fingerprints": [], "listen": [],
                "terminals": [], "pool_size": PEER_POOL_SIZE}
    if role == "terminal":
        return {"enabled": True, "port": PEER_PORT, "hub": peer_hub_address(pins),
                "hub_fingerprints": [pins[r] for r in pins.hub_roles()],
                "hub_cluster": pins.hub_roles() != ["hub"],
                "listen": [], "terminals": [], "pool_size": PEER_POOL_SIZE}
    return {"enabled": True, "port": PEER_PORT, "hub": "", "hub_fingerprints": [], "listen": [],
            "terminals": [{"name": SITE_NAME, "fingerprints": [pins["terminal"]], "prefixes": CLIENT_SUBNETS}],
            "pool_size": PEER_POOL_SIZE}


def peer_dir(topo: TopologyLike, role: str) -> str:
    """A gateway's identity directory (its key stays there, mode 0700)."""
    return topo.path(f"peer-{topo.ns(role)}")


def identity(topo: TopologyLike, role: str) -> dict[str, Any]:
    """The identity of the gateway at `role`, made on first use (`perigee identity init`)."""
    p = subprocess.run([gateway_binary(), "identity", "init", "--state-dir", peer_dir(topo, role)],
                       capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise GatewayError(f"perigee identity init for {role}: {p.stderr.strip()}")
    out: dict[str, Any] = json.loads(p.stdout)
    return out


def peer_pins(topo: TopologyLike) -> PeerPins:
    """Every gateway's fingerprint (the hub's, or each cluster gateway's, and the terminal's): what each
    enrolls or pins of the other."""
    n = cluster_size(topo)
    hubs = [f"gw{k}" for k in range(1, n + 1)] if n else ["hub"]
    return PeerPins({role: str(identity(topo, role)["fingerprint"]) for role in (*hubs, "terminal")})


def lab_peer_pins(topo: TopologyLike) -> PeerPins | None:
    """The pins when the lab runs the peer path (`--gateway both`, configured), for a daemon started later."""
    try:
        state = json.loads(Path(topo.path("state.json")).read_text())
    except (OSError, ValueError):
        return None
    return peer_pins(topo) if state.get("gateway") == "both" else None


# The cache when enabled: small memory/disk budgets (the store lives in the run dir, on tmpfs).
CACHE_CONFIG: dict[str, Any] = {"enabled": True, "memory_mb": 64, "disk_mb": 256, "max_object_mb": 200}
CACHE_ENV = "SATLAB_GATEWAY_CACHE"
# The lab's DNS server behind the satellite (server namespace): the terminal's resolver forwards
# to it, and the hub's Squid resolves through it.
LAB_RESOLVER = "10.71.3.53"


def dns_config(role: str) -> dict[str, Any]:
    """The terminal caches DNS at the site; the hub only names the resolver (for its Squid)."""
    return {"enabled": role == "terminal", "upstream": [LAB_RESOLVER]}


def cache_from_env() -> bool:
    return os.environ.get(CACHE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


# `SATLAB_GATEWAY_RESTART=always`: each gateway runs under satlab.gwsupervise, which restarts it
# like the packaged systemd unit (debian/perigee-gateway.service: Restart=always, RestartSec=2).
# Off by default: without it a killed daemon stays dead, as it would when run by hand.
RESTART_ENV = "SATLAB_GATEWAY_RESTART"
RESTART_SEC = 2.0
# `SATLAB_GATEWAY_BIN=path`: run this perigee binary instead of bin/perigee (the soak's build with
# the test-only apply fault hook, gateway/target/release/perigee-faults).
BIN_ENV = "SATLAB_GATEWAY_BIN"


def restart_from_env() -> bool:
    value = os.environ.get(RESTART_ENV, "").strip().lower()
    if value not in ("", "no", "always"):
        raise GatewayError(f"{RESTART_ENV} must be 'always' or 'no', not {value!r}")
    return value == "always"


def gateway_binary() -> str:
    path = os.environ.get(BIN_ENV, "").strip()
    if not path:
        return PERIGEE
    if not os.access(path, os.X_OK):
        raise GatewayError(f"{BIN_ENV}={path} is not an executable file")
    return path


def supervisor_pidfile(topo: TopologyLike, role: str) -> str:
    return topo.path(f"gw-{topo.ns(role)}.supervisor.pid")


class GatewayError(RuntimeError):
    pass


class TopologyLike(Protocol):
    """The part of satlab's Topology this hook needs."""

    def ns(self, role: str) -> str: ...

    def path(self, name: str) -> str: ...


MSS = 1448
# The emulator's rate counts whole Ethernet frames (1448 B of payload in 1514 B: TCP with
# timestamps, IPv4, Ethernet), while TCP's pacer counts payload bytes only: paced at the raw link
# rate, the wire would carry 4.6% more than the link drains and the queue would grow by ~0.3 MB/s.
WIRE_FRAME = MSS + 32 + 20 + 14
PACING_HEADROOM = 1.02  # pace a little above the link rate so the link never idles behind the pacer
MIN_BUF = 1 << 20
LOSS_RCV_WINDOWS = 4  # receive buffer, in BDPs of the direction received (the BoD page's lossy-link factor)
RTT0_MS = float(default(Hybla, "rtt0_ms"))  # Hybla's reference RTT: the gateway's default, which the lab keeps
LD_RHO_MIN = float(extension(Satellite, "congestion_control", "x-ld-rho-min"))  # hybla_ld's (the default's) rho floor
ROUTE_WINDOW_MAX: int = bound(Satellite, "initcwnd", "le")  # the config's bound on initcwnd (segments)
ROUTE_WINDOW_MIN: int = default(Satellite, "initcwnd")  # never below the gateway's own initial window


def pacing_rate(link_bps: float) -> int:
    """SO_MAX_PACING_RATE (payload bits/s) that puts link_bps x PACING_HEADROOM on the wire."""
    return int(link_bps * MSS / WIRE_FRAME * PACING_HEADROOM)


def cwnd_ceiling(rate_bps: float, rtt_ms: float) -> int:
    """Hybla cwnd ceiling in segments: 2 x rate x RTT / MSS, clamped to Hybla's bound. Asked of the gateway
    (`perigee hybla ceiling`, perigee_hybla::cwnd_ceiling_for_link), never restated here."""
    argv = [PERIGEE, "hybla", "ceiling", "--rate-bps", str(int(rate_bps)), "--base-rtt-ms", str(math.ceil(rtt_ms)),
            "--mss", str(MSS)]
    return int(subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout)


def link_tuning(role: str, forward: dict[str, Any], ret: dict[str, Any]) -> dict[str, int]:
    """Satellite-leg socket and route tuning from the link profile (forward = hub -> terminal).

    The gateway at `role` sends over the satellite in one direction (the hub forward, the
    terminal in return) and receives in the other.
    - Buffers: send 2 x BDP of the faster direction (the kernel doubles SO_SNDBUF again for its
      bookkeeping), so it never limits a window of BDP + queue; receive 4 x BDP of the direction
      received (at least the send buffer), so a lossy link's out-of-order data never closes the window.
    - Pacing: the sending direction's rate in payload bytes (the link's frame rate x MSS /
      frame) plus a little headroom; it keeps one flow from overflowing the emulator's queue.
    - Shaping: the sending direction's rate, exactly (the gateway's qdisc and the emulator both
      count whole Ethernet frames). Pacing is per socket, so six connections of a web page
      (each with Hybla's rho-scaled first flight) together send up to 6x the link rate and
      overflow the emulator's drop-tail queue; the aggregate shaper keeps that queue in the
      gateway, where TCP small queues hold it to a few packets per socket and nothing drops.
    - cwnd_max: two BDPs of the sending direction over the RTT its flows see (propagation plus
      the BoD allocation delay), perigee_hybla::cwnd_ceiling_for_link: at GEO rho one
      slow-start ACK would otherwise open the window to 65536 segments. Each gateway writes it
      into its own network namespace's Hybla entry, so labs sharing the kernel (and a
      `--gateway both` terminal's 5 Mbit/s value vs its hub's 50 Mbit/s one) no longer overwrite
      each other (docs/hybla.md, per-namespace parameters). Measured (geo-hts-50mb --quick, two
      runs each, 0 vs 5180): completion hub 12.36/12.21 -> 12.09/12.04 s, both 9.71/10.41 ->
      9.58/9.58 s, no drops either way, peak emulator queue 14/75 -> 14/7 ms (hub).
    - initcwnd (route): hybla_ld, the default, multiplies it by rho = max(RTT / RTT0, its floor),
      so BDP / rho segments start the first flight at one BDP; it leaves paced at the link rate,
      never as a burst.
    - initrwnd (route): 0, no route value. Since Linux 5.4 a socket's initial receive window is
      its whole receive space (here the 2 x BDP buffer), and a route initrwnd can only lower it
      (min(space, initrwnd x MSS)); the config's bound (1000 segments, 1.45 MB) is below the
      geo-hts forward BDP (2590 segments), so any value held the peer's first flight to 40% of
      the pipe (measured: 0.36 s rwnd-limited, 9.93 s vs 9.58 s for 50 MB through both gateways).
      Locally originated sockets (Squid) start from their own, smaller, space either way.
    """
    rtt_ms = float(forward["delay_ms"]) + float(ret["delay_ms"])
    rtt_s = rtt_ms / 1000.0
    send, recv = (forward, ret) if role == "hub" else (ret, forward)
    rate = float(send["rate_bps"])
    buf = max(MIN_BUF, int(2 * max(rate, float(recv["rate_bps"])) * rtt_s / 8))
    # Four windows to receive into: a loss holds the data behind it for about two RTTs, and a link
    # that loses a frame in every window (BER 1e-6 at 50 Mbit/s, a rain fade) must still advertise
    # the pipe (docs/hybla.md, *The default*). It costs nothing while frames arrive in order (the
    # relay reads them at once); the send buffer, which a bulk flow does fill, stays at two.
    rcvbuf = max(buf, int(LOSS_RCV_WINDOWS * float(recv["rate_bps"]) * rtt_s / 8))
    rho = max(LD_RHO_MIN, rtt_ms / RTT0_MS)
    send_bdp_segs = rate * rtt_s / 8 / MSS
    initcwnd = min(ROUTE_WINDOW_MAX, max(ROUTE_WINDOW_MIN, int(send_bdp_segs / rho)))
    alloc_ms = float((send.get("bod") or {}).get("allocation_delay_ms", 0))
    return {"sndbuf_bytes": buf, "rcvbuf_bytes": rcvbuf, "pacing_rate_bps": pacing_rate(rate),
            "cwnd_max": cwnd_ceiling(rate, rtt_ms + alloc_ms), "initcwnd": initcwnd, "initrwnd": 0,
            "shaping_rate_bps": int(rate), "forward_rate_bps": int(forward["rate_bps"]),
            "return_rate_bps": int(ret["rate_bps"])}


def tuning_from_state(topo: TopologyLike, role: str) -> dict[str, int] | None:
    """link_tuning() for the lab's running link (satlab's state file); None when it is unknown."""
    try:
        state = json.loads(Path(topo.path("state.json")).read_text())
        return link_tuning(role, state["forward"], state["return"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def default_config(role: str, cache: bool = False, tuning: dict[str, int] | None = None,
                   peer: PeerPins | None = None) -> dict[str, Any]:
    """The lab's config for the gateway at `role`: only what the lab decides (its addresses, routes, the
    link's tuning when known); every other setting is the gateway's own default."""
    satellite: dict[str, Any] = {"routes": SAT_ROUTES[role]}
    cfg: dict[str, Any] = {
        "revision": f"satlab-{role}",
        "role": role,
        "interfaces": {"lan": ["lan0"], "satellite": "sat0"},
        "served_subnets": CLIENT_SUBNETS,
        "satellite": satellite,
        "bypass": builtin_bypass_json(),
        "cache": dict(CACHE_CONFIG) if cache else {"enabled": False},
        "dns": dns_config(role),
        "peer": peer_section(role, peer),
        # The lab's one remote site: its client LAN (per-site stats, docs/splitter.md).
        "sites": [{"name": SITE_NAME, "prefixes": CLIENT_SUBNETS}],
        # Off, so an idle warm connection of the peer path keeps its initial window.
        "sysctls": {"net.ipv4.tcp_slow_start_after_idle": "0"},
    }
    if tuning:
        satellite.update({k: tuning[k] for k in ("sndbuf_bytes", "rcvbuf_bytes", "pacing_rate_bps", "initcwnd",
                                                 "initrwnd")})
        # The link's rates: the dashboard's utilisation and link alert.
        satellite.update({k: tuning[k] for k in ("forward_rate_bps", "return_rate_bps") if tuning.get(k)})
        cfg["hybla"] = {"cwnd_max": tuning["cwnd_max"]}
        if tuning["shaping_rate_bps"]:
            cfg["shaping"] = {"enabled": True, "rate_bps": tuning["shaping_rate_bps"]}
    return cfg


def socket_path(topo: TopologyLike, role: str) -> str:
    return topo.path(f"gw-{topo.ns(role)}.sock")


def _files(topo: TopologyLike, role: str) -> tuple[str, str, str]:
    ns = topo.ns(role)
    return topo.path(f"gw-{ns}.json"), topo.path(f"gw-{ns}.pid"), topo.path(f"gw-{ns}.log")


def pidfile(topo: TopologyLike, role: str) -> str:
    """Where the daemon's (master's) pid is written at each start."""
    return _files(topo, role)[1]


def client(sock_path: str, timeout: float = 5.0) -> GatewayClient:
    """The control protocol of the daemon listening on `sock_path` (perigee_control.client)."""
    return GatewayClient(sock_path, timeout_s=timeout)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _read_pid(pidfile: str) -> int | None:
    try:
        return int(Path(pidfile).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def squid_service(topo: TopologyLike, role: str) -> str:
    """Squid's -n name: alphanumeric only (Squid refuses anything else)."""
    return "perigee" + "".join(c for c in topo.ns(role) if c.isalnum())


def squid_dir(topo: TopologyLike, role: str) -> str:
    return topo.path(f"squid-{topo.ns(role)}")


def dns_dir(topo: TopologyLike, role: str) -> str:
    return topo.path(f"dns-{topo.ns(role)}")


def _start_one(topo: TopologyLike, role: str, timeout: float, cache: bool, peer: PeerPins | None = None,
               configured: bool = True) -> None:
    """One daemon in `role`'s namespace; `configured` False starts it without a config (a new box, set up
    later through its control socket): ready once it answers, with no worker running yet."""
    place = _placement(topo, role)
    cfg_path, pidfile, logfile = _files(topo, role)
    sock = socket_path(topo, role)
    config_args: list[str] = []
    if configured:
        cfg = place.config(cache, tuning_from_state(topo, place.config_role), peer)
        Path(cfg_path).write_text(json.dumps(cfg, indent=2))
        config_args = ["--config", cfg_path]
    sq = squid_dir(topo, role)
    dn = dns_dir(topo, role)
    # nsenter --net, not `ip netns exec`: the latter remounts /sys, which hides /sys/fs/bpf and with
    # it the pins of the BPF Hybla loaded on the host (every hybla parameter change would fail).
    argv = ["nsenter", f"--net=/run/netns/{topo.ns(role)}", "--", PERIGEE, "gateway", "run", *config_args,
            "--control-socket", sock, "--squid-state-dir", sq, "--squid-run-dir", os.path.join(sq, "run"),
            "--squid-service", squid_service(topo, role),
            "--dns-state-dir", dn, "--dns-run-dir", os.path.join(dn, "run"),
            "--peer-state-dir", peer_dir(topo, role), *place.extra_args]
    argv[argv.index(PERIGEE)] = gateway_binary()
    supervised = restart_from_env()
    if supervised:
        # The packaged unit's restart policy (gwsupervise); it writes the daemon's pid itself.
        argv = gwsupervise.argv(pidfile, RESTART_SEC, argv)
    with open(logfile, "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    Path(supervisor_pidfile(topo, role) if supervised else pidfile).write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            tail = Path(logfile).read_text(errors="replace")[-800:]
            raise GatewayError(f"perigee gateway in {topo.ns(role)} exited ({proc.returncode}); log:\n{tail}")
        try:
            health = client(sock, timeout=1.0).health()
            if not configured or all(w.alive for w in health.workers):
                return
        except ControlError:
            pass
        if time.monotonic() > deadline:
            raise GatewayError(f"perigee gateway in {topo.ns(role)} did not answer /v1/health in {timeout:.0f} s")
        time.sleep(0.05)


def _stop_supervisor(topo: TopologyLike, role: str, grace: float) -> None:
    """SIGTERM to gwsupervise (it stops the daemon cleanly and does not restart it)."""
    path = supervisor_pidfile(topo, role)
    pid = _read_pid(path)
    if pid is not None and _alive(pid):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            cmd = b""
        if b"gwsupervise" in cmd:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace + 2
            while _alive(pid) and time.monotonic() < deadline:
                _reap(pid)
                time.sleep(0.05)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
            _reap(pid)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _stop_one(topo: TopologyLike, role: str, grace: float = 15.0) -> None:
    """SIGTERM (the daemon cleans up), SIGKILL after `grace` seconds; grace 0 is a crash: SIGKILL at once."""
    _stop_supervisor(topo, role, grace)
    _, pidfile, _ = _files(topo, role)
    pid = _read_pid(pidfile)
    if pid is not None and _alive(pid):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            cmd = b""
        if b"gateway" in cmd:
            # SIGTERM: the daemon removes its nft table, rules, routes, stops Squid.
            os.kill(pid, signal.SIGTERM if grace > 0 else signal.SIGKILL)
            deadline = time.monotonic() + grace
            while _alive(pid) and time.monotonic() < deadline:
                _reap(pid)
                time.sleep(0.05)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
            _reap(pid)
    for p in (pidfile, socket_path(topo, role)):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def cluster_size(topo: TopologyLike) -> int:
    """Gateways of a hub cluster (`satlab up --hub-gateways N`), 0 for the classic lab."""
    return int(getattr(topo, "hub_gateways", 0) or 0)


class Placement:
    """Where one daemon runs (namespace role) and what it is configured as."""

    def __init__(self, ns_role: str, config_role: str, routes: list[dict[str, str]],
                 extra_args: tuple[str, ...] = ()) -> None:
        self.ns_role, self.config_role, self.routes = ns_role, config_role, routes
        self.extra_args = extra_args

    def config(self, cache: bool, tuning: dict[str, int] | None, peer: PeerPins | None = None) -> dict[str, Any]:
        # A hub cluster's gateways each shape at the whole carrier's rate, like a single hub: a flow may use
        # all of it while the others are idle; their sum is the satellite-side router's to hold (docs/cluster.md).
        cfg = default_config(self.config_role, cache, tuning, peer)
        cfg["satellite"]["routes"] = self.routes
        return cfg


CLUSTER_WORKERS = "2"  # N gateways share the lab's cores: 2 workers each hold thousands of flows


def cluster_workers() -> str:
    """Workers per cluster gateway: 2, or SATLAB_HUB_WORKERS (a benchmark that needs a worker's descriptors where
    this machine caps a process lower than the packaged unit's LimitNOFILE)."""
    n = os.environ.get("SATLAB_HUB_WORKERS", CLUSTER_WORKERS)
    if not n.isdigit() or not 1 <= int(n) <= 16:
        raise ValueError(f"SATLAB_HUB_WORKERS must be 1..16, not {n!r}")
    return n


def _placement(topo: TopologyLike, ns_role: str) -> Placement:
    n = cluster_size(topo)
    if ns_role.startswith("gw") and n:
        from .cluster import fleet, frr
        from .cluster.plan import member

        m = member(int(ns_role[2:]))
        # The clients behind the satellite, both families; the terminal's satellite address too: its peer
        # path's connections come from there.
        routes = [{"dst": "10.71.1.0/24", "via": m.hub_v4}, {"dst": "fd71:1::/64", "via": m.hub_v6},
                  {"dst": "10.71.2.0/24", "via": m.hub_v4}]
        # An enrolled gateway (satlab cluster enroll) also serves its control protocol over mutual TLS. Its
        # GET /v1/routing reads the FRR of its own namespace (cluster/frr.py).
        args = ("--workers", cluster_workers(), "--frr-vty-dir", frr.frr_dir(topo, ns_role),
                *fleet.tls_args(topo, ns_role))
        return Placement(ns_role, "hub", routes, args)
    routes = SAT_ROUTES[ns_role]
    if ns_role == "terminal" and n:
        from .cluster.plan import members

        # Each gateway's peer listener is across the satellite: its connections get the satellite leg.
        routes = routes + [{"dst": f"{m.hub_side_v4.rsplit('.', 1)[0]}.0/24", "via": PEER_HUB}
                           for m in members(topo)]  # type: ignore[arg-type]
    return Placement(ns_role, ns_role, routes)


def placements(topo: TopologyLike, where: str) -> list[str]:
    """The namespace roles that run a daemon for `--gateway where`: in a cluster `hub` is every gateway."""
    n = cluster_size(topo)
    roles: list[str] = []
    for role in WHERE[where]:
        roles += [f"gw{k}" for k in range(1, n + 1)] if role == "hub" and n else [role]
    return roles


def start(topo: TopologyLike, where: str, timeout: float = 45.0, cache: bool | None = None,
          configured: bool = True) -> None:
    """Start the gateway(s); `cache` None means: as $SATLAB_GATEWAY_CACHE says (default off); `configured`
    False starts them without a config (and no peer path: there is no config to enroll the terminal)."""
    if where not in WHERE:
        raise GatewayError(f"--gateway must be one of {', '.join(WHERE)}, not {where!r}")
    with_cache = cache_from_env() if cache is None else cache
    # The peer path: to the hub, or to each gateway of a hub cluster (the controller pushes its table).
    peer = peer_pins(topo) if where == "both" and configured else None
    started: list[str] = []
    try:
        for role in placements(topo, where):
            _start_one(topo, role, timeout, with_cache, peer, configured)
            started.append(role)
    except BaseException:
        for role in reversed(started):
            _stop_one(topo, role)
        raise
    if peer is not None:
        # In a cluster, the pools to the other gateways open once the controller's table arrives, which
        # needs the gateways serving (satlab's `up` waits for those afterwards).
        wait_peer_pool(socket_path(topo, "terminal"))


def wait_peer_pool(sock: str, timeout: float = 15.0, hubs: int = 1) -> int:
    """Wait until every worker of the terminal has its warm pools full (a few round trips after
    start; a pool to each of `hubs` gateways of a cluster, each sized as the terminal says: `full`),
    so the lab's first flows already take the peer path; returns how many are ready (fewer after
    `timeout`: those flows then go direct, which is correct, only slower)."""
    deadline = time.monotonic() + timeout
    ready = 0
    while time.monotonic() < deadline:
        try:
            health = client(sock, timeout=2.0).health()
        except ControlError:
            health = None
        if health is not None:
            ready = health.peer.ready if health.peer else 0
            # `full` counts the pools the terminal holds now: until the cluster's table arrives, only
            # the one to its first gateway.
            if health.peer and health.peer.gateways >= hubs and ready >= health.peer.full > 0:
                break
        time.sleep(0.2)
    return ready


def stop(topo: TopologyLike, where: str | None = None) -> None:
    # Last started, first stopped. With the kernel's tcp_hybla each daemon puts back the host-wide
    # rtt0 it found at its start, so only this order leaves what was there before the first one
    # started (Perigee's BPF Hybla: each daemon just removes its own namespace's entry).
    for role in reversed(placements(topo, where or "both")):
        _stop_one(topo, role)


def start_one(topo: TopologyLike, role: str, timeout: float = 45.0, cache: bool | None = None,
              peer: PeerPins | None = None) -> None:
    """One daemon in namespace `role` (a cluster gateway `gwK`, `hub` or `terminal`); `peer`: the lab's
    pins when the peer path is on (`peer_pins`)."""
    _start_one(topo, role, timeout, cache_from_env() if cache is None else cache, peer)


def stop_one(topo: TopologyLike, role: str, crash: bool = False) -> None:
    """Stop one daemon: cleanly, or (`crash`) with SIGKILL, leaving its nft table as a crash does."""
    _stop_one(topo, role, grace=0 if crash else 15.0)
