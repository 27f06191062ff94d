"""hub-scale: many simulated terminals of the peer path against a 3-gateway hub cluster (docs/cluster.md)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from bench import hubnet, hubplots, hubstats, lab, procs, records, report
from bench.context import Context

NAME = "hub-scale"
KIND = "hub-scale"
TITLE = "Hub scale: simulated terminals on a 3-gateway cluster"
DESCRIPTION = (
    "`satlab up --profile geo-hts --hub-gateways 3 --gateway both --hub-idle-timer 5` (prefix `hs-`), plus "
    "`terminals` simulated terminals (bench/hubsim.py: asyncio + Python's TLS 1.3) in `spaces` namespaces on "
    "the hub router (terrestrial: the hub is measured, not the satellite). Each terminal has its own EC P-256 "
    "identity, enrolled at every hub gateway (`peer.terminals`, one /32 client prefix each in 10.90.0.0/16), "
    "its own source address, and keeps `pool` ready connections to every gateway (what a packaged terminal, "
    "2 workers with the default `peer.pool_size` 8, keeps to each gateway), one long poll for the cluster "
    "table, and aims each flow at its bucket's gateway. The hub gateways run `hub_workers` workers each. "
    "`setup_rate`: pool connections ready (TCP, TLS 1.3 with both keys pinned, READY) "
    "over the wall time from the start to the last one; `hub_cpu_per_connection`: the gateways' daemons' CPU "
    "time (/proc, master and workers) during that setup over the connections; `first_byte`: a `fetch_size`-byte "
    "fetch from the "
    "lab's bulk server through OPEN (from writing OPEN to the first byte of the answer), `fetch_flows` flows; "
    "memory: the gateways' daemons' PSS (master and workers, /proc smaps_rollup) before, with the terminals "
    "enrolled, and with their pools up; kernel socket memory not included. `api_terminals`: GET "
    "/api/v1/peer/terminals of an API on gw1's control socket with gw2 and gw3 registered in its fleet (mutual TLS "
    "on management links, `satlab cluster enroll`): every terminal listed with each gateway's view of it, asked "
    "of all three on every request. Failover: new flows from all terminals every `probe_interval_s` for "
    "`probe_s`, gw2's daemon SIGKILLed a third of the way in; what was lost and how long until new flows "
    "complete again in every bucket (simulated terminals have no direct path: a flow with no ready "
    "connection to its gateway is counted failed, `no_conn`). Everything shares the machine's 2 cores: the "
    "simulated terminals' TLS costs as much CPU "
    "as the gateways', so the setup rate is a lower bound of the cluster's."
)
PARAMS: dict[str, dict[str, Any]] = {
    "quick": {
        "terminals": 60,
        "spaces": 2,
        "pool": 16,
        "hub_workers": 3,
        "fetch_flows": 200,
        "fetch_size": 1024,
        "fetch_interval_s": 0.01,
        "api_requests": 10,
        "probe_s": 9.0,
        "probe_interval_s": 0.02,
        "concurrency": 64,
        "api_fleet": True,
    },
    "full": {
        "terminals": 1000,
        "spaces": 4,
        "pool": 16,
        "hub_workers": 3,
        "fetch_flows": 2000,
        "fetch_size": 1024,
        "fetch_interval_s": 0.004,
        "api_requests": 30,
        "probe_s": 15.0,
        "probe_interval_s": 0.008,
        "concurrency": 96,
        "api_fleet": True,
    },
}
PREFIX = "hs-"
GATEWAYS = ("gw1", "gw2", "gw3")
VICTIM = "gw2"
SERVER, BULK_PORT = lab.SERVER_V4, 5001
SETUP_HUNG_S = 900.0
FAILOVER_BIN_S = 0.25
LAB_ARGS = ["--hub-gateways", "3", "--hub-idle-timer", "5"]


class SimProc:
    """One bench.hubsim process in its namespace: JSON lines in and out."""

    def __init__(self, ns: str, spec: Path, log: Path) -> None:
        self.proc = subprocess.Popen(
            procs.in_netns(ns, procs.tool_argv("bench.hubsim", str(spec))),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log.open("w"),
            text=True,
        )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.lines.put(json.loads(line))
            except ValueError:
                continue

    def send(self, cmd: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def wait(self, event: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None and self.lines.empty():
                raise procs.ToolError(f"hubsim: no {event!r} (exit {self.proc.poll()})")
            try:
                msg = self.lines.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            if msg.get("event") == event:
                return msg

    def stop(self) -> None:
        try:
            self.send({"cmd": "stop"})
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(timeout=10)


def all_wait(sims: list[SimProc], event: str, timeout: float) -> list[dict[str, Any]]:
    return [s.wait(event, timeout) for s in sims]


def topo() -> Any:
    from satlab.topology import Topology

    return Topology(prefix=PREFIX, hub_gateways=3)


def control(role: str, method: str, path: str) -> Any:
    from satlab.gateway import client, socket_path

    return client(socket_path(topo(), role), timeout=30).call(method, path)


def master_pid(role: str) -> int:
    t = topo()
    return int(Path(t.path(f"gw-{t.ns(role)}.pid")).read_text().split()[0])


def memory(roles: tuple[str, ...]) -> dict[str, dict[str, int]]:
    return {g: hubnet.gateway_memory(master_pid(g)) for g in roles}


def hub_view(roles: tuple[str, ...]) -> dict[str, dict[str, int]]:
    """Each gateway's GET /v1/peer: idle connections and live flows of the simulated terminals, refusals."""
    out = {}
    for g in roles:
        v = control(g, "GET", "/v1/peer")
        sims = [t for t in v["terminals"] if str(t["name"]).startswith("sim-")]
        out[g] = {
            "idle": sum(int(t["idle_connections"]) for t in sims),
            "live": sum(int(t["live_flows"]) for t in sims),
            "connected_terminals": sum(1 for t in sims if t["idle_connections"] or t["live_flows"]),
            "refused_unknown": int(v.get("refused_unknown") or 0),
        }
    return out


def wait_pools(sims: list[SimProc], want: int, timeout: float) -> dict[str, int]:
    """Until the terminals hold `want` ready connections per gateway (refills after the polls took theirs)."""
    deadline = time.monotonic() + timeout
    ready: dict[str, int] = {}
    while time.monotonic() < deadline:
        for s in sims:
            s.send({"cmd": "status"})
        states = all_wait(sims, "status", 60)
        ready = {g: sum(st["ready"].get(g, 0) for st in states) for g in GATEWAYS}
        if all(v >= want for v in ready.values()):
            break
        time.sleep(1.0)
    return ready


def start_sims(
    ctx: Context,
    params: dict[str, Any],
    run_dir: Path,
    table: dict[str, Any],
    pins: list[str],
    sources: list[list[str]],
    terms: list[dict[str, Any]],
) -> list[SimProc]:
    from satlab.cluster.plan import member

    sims = []
    per = -(-len(terms) // params["spaces"])
    for k in range(params["spaces"]):
        mine = terms[k * per : (k + 1) * per]
        spec = {
            "gateways": {g: member(int(g[2:])).hub_side_v4 for g in GATEWAYS},
            "port": lab.PEER_PORT,
            "pool": params["pool"],
            "server": SERVER,
            "server_port": BULK_PORT,
            "hub_fingerprints": pins,
            "table": table,
            "concurrency": params["concurrency"],
            "polls": "terminal",
            "terminals": [{**t, "source": sources[k][j]} for j, t in enumerate(mine)],
        }
        path = run_dir / f"spec-{k + 1}.json"
        path.write_text(json.dumps(spec))
        sims.append(SimProc(hubnet.sim_ns(PREFIX, k + 1), path, run_dir / f"hubsim-{k + 1}.log"))
    all_wait(sims, "loaded", 120)
    ctx.log(f"{NAME}: {len(terms)} terminals loaded in {len(sims)} processes; connecting")
    for s in sims:
        s.send({"cmd": "go"})
    return sims


def fleet_api(ctx: Context, params: dict[str, Any]) -> Any:
    """The API on gw1's control socket; with `api_fleet`, gw2 and gw3 registered as its fleet's members (their
    daemons restarted with the TLS control listener, satlab's `cluster enroll`), so the page asks all three."""
    from bench.hubapi import HubApi
    from satlab.cluster import fleet, members
    from satlab.gateway import socket_path

    api = HubApi(socket_path(topo(), "gw1"))
    try:
        if params.get("api_fleet"):
            for g in GATEWAYS[1:]:
                members.enroll(topo(), g, api.register(g, fleet.address(g)))
            ctx.log(f"{NAME}: {', '.join(GATEWAYS[1:])} registered in the API's fleet")
    except BaseException:
        api.close()
        raise
    return api


def measure(ctx: Context, params: dict[str, Any]) -> tuple[list[records.Record], dict[str, Any]]:
    api = fleet_api(ctx, params)
    try:
        return measure_with(ctx, params, api)
    finally:
        api.close()


def measure_with(ctx: Context, params: dict[str, Any], api: Any) -> tuple[list[records.Record], dict[str, Any]]:
    from satlab.cluster import bucket, members
    from satlab.cluster.plan import member
    from satlab.gateway import peer_pins, socket_path

    n, variant = int(params["terminals"]), f"T{params['terminals']}"
    run_dir = Path(topo().path("hubscale"))
    run_dir.mkdir(parents=True, exist_ok=True)
    raw: dict[str, Any] = {}
    t = time.monotonic()
    terms = hubnet.identities(run_dir / "ids", n)
    ctx.log(f"{NAME}: {n} identities in {time.monotonic() - t:.1f} s")
    pins = [v for r, v in peer_pins(topo()).items() if r != "terminal"]
    mem0 = memory(GATEWAYS)
    hubnet.sim_down(PREFIX, params["spaces"])
    sources = hubnet.sim_up(PREFIX, params["spaces"], -(-n // params["spaces"]))
    for g in GATEWAYS:
        t = time.monotonic()
        ans = hubnet.enroll(socket_path(topo(), g), member(int(g[2:])).hub_v4, terms)
        raw.setdefault("enroll_s", {})[g] = time.monotonic() - t
        if not ans.get("ok", True):
            raise procs.ToolError(f"enrolling at {g}: {json.dumps(ans)[:400]}")
    time.sleep(2.0)
    mem1 = memory(GATEWAYS)
    edge = hubnet.EdgeRoute(PREFIX).start()
    sims: list[SimProc] = []
    try:
        table = control("gw1", "GET", "/v1/cluster/table")["table"]
        if not bucket.agrees(table):
            raise procs.ToolError("the Python bucket hash disagrees with the routers' (satlab.cluster.bucket)")
        cpu0 = {g: hubnet.gateway_cpu_s(master_pid(g)) for g in GATEWAYS}
        sims = start_sims(ctx, params, run_dir, table, pins, sources, terms)
        setup_events = all_wait(sims, "setup", SETUP_HUNG_S)
        setup = hubstats.setup_summary(setup_events)
        hubplots.setup_ramp(
            ctx.plot_path(f"{NAME}-setup"),
            f"{n} terminals x {params['pool']} x {len(GATEWAYS)} gateways: pool connections ready",
            hubstats.setup_curve(setup_events),
        )
        cpu = sum(hubnet.gateway_cpu_s(master_pid(g)) - cpu0[g] for g in GATEWAYS)
        setup["hub_cpu_s"] = cpu
        setup["hub_cpu_per_conn_ms"] = cpu * 1000 / setup["connections"] if setup["connections"] else 0.0
        ctx.log(
            f"{NAME}: {setup['connections']} pool connections in {setup['wall_s']:.1f} s "
            f"({setup['rate_per_s']:.0f}/s), {setup['failed']} failed {setup['errors']}"
        )
        ready = wait_pools(sims, n * params["pool"], 120)
        time.sleep(2.0)
        view = hub_view(GATEWAYS)
        mem2 = memory(GATEWAYS)
        mem = hubstats.memory_summary(mem0, mem1, mem2, {g: view[g]["idle"] for g in GATEWAYS}, n)
        raw.update(
            {
                "setup": setup,
                "ready": ready,
                "hub_view": view,
                "memory": mem,
                "memory_raw": {"base": mem0, "enrolled": mem1, "pooled": mem2},
            }
        )
        per = -(-params["fetch_flows"] // len(sims))
        for s in sims:
            s.send(
                {
                    "cmd": "fetch",
                    "flows": per,
                    "size": params["fetch_size"],
                    "interval": params["fetch_interval_s"] * len(sims),
                }
            )
        fetched = [f for e in all_wait(sims, "fetch", 600) for f in e["flows"]]
        fb = hubstats.first_byte_summary(fetched)
        ctx.log(f"{NAME}: first byte p50 {fb['p50_ms']} ms p99 {fb['p99_ms']} ms, {fb['results']}")
        api.reimport()  # the running config with the terminals enrolled: the version the page lists
        page = api.time_page(params["api_requests"])
        ctx.log(f"{NAME}: {hubapi_line(page)}")
        fail = failover(ctx, sims, params, table, members)
        raw.update({"first_byte": fb, "api": page, "failover": fail})
    finally:
        for s in sims:
            s.stop()
        edge.stop()
        hubnet.sim_down(PREFIX, params["spaces"])
    return publish(variant, n, params, raw), raw


def hubapi_line(page: dict[str, Any]) -> str:
    return (
        f"GET /api/v1/peer/terminals: {page['terminals']} listed from {', '.join(page['gateways'])}, "
        f"p50 {page['p50_ms']:.1f} ms, p99 {page['p99_ms']:.1f} ms, {page['bytes']} B"
    )


def failover(
    ctx: Context, sims: list[SimProc], params: dict[str, Any], table: dict[str, Any], members: Any
) -> dict[str, Any]:
    for s in sims:
        s.send(
            {
                "cmd": "probe",
                "duration": params["probe_s"],
                "size": params["fetch_size"],
                "interval": params["probe_interval_s"] * len(sims),
            }
        )
    time.sleep(params["probe_s"] / 3)
    t_kill = time.time()
    members.crash(topo(), VICTIM)
    ctx.log(f"{NAME}: SIGKILLed {VICTIM}")
    flows = [f for e in all_wait(sims, "probe", params["probe_s"] + 120) for f in e["flows"]]
    for s in sims:
        s.send({"cmd": "status"})
    states = all_wait(sims, "status", 60)
    lost_at: dict[str, list[float]] = {}
    for st in states:
        for g, ts in st["lost_at"].items():
            lost_at.setdefault(g, []).extend(ts)
    updates = [u for st in states for u in st["table_updates"]]
    out = hubstats.failover_summary(flows, t_kill, VICTIM, table, SERVER, BULK_PORT, lost_at, updates)
    hubplots.failover(
        ctx.plot_path(f"{NAME}-failover"),
        f"New flows of the simulated terminals around {VICTIM}'s SIGKILL",
        hubstats.flow_series(flows, t_kill, FAILOVER_BIN_S),
        out["table_s"],
        FAILOVER_BIN_S,
    )
    ctx.log(f"{NAME}: failover {out}")
    return out


def publish(variant: str, n: int, params: dict[str, Any], raw: dict[str, Any]) -> list[records.Record]:
    m = records.measured
    s, mem, fb, api, fo = raw["setup"], raw["memory"]["mean"], raw["first_byte"], raw["api"], raw["failover"]
    conns = n * params["pool"] * len(GATEWAYS)
    out = [
        m(
            NAME,
            variant,
            "pool_connections",
            s["connections"],
            "conn",
            f"of {conns} ({n} terminals x {params['pool']} x {len(GATEWAYS)} gateways); {s['failed']} failed "
            + ", ".join(f"{k}: {v}" for k, v in s["errors"].items()),
        ),
        m(NAME, variant, "setup_rate", s["rate_per_s"], "conn/s", f"{s['wall_s']:.1f} s for all"),
        m(
            NAME,
            variant,
            "hub_cpu_per_connection",
            s["hub_cpu_per_conn_ms"],
            "ms",
            f"the gateways' CPU time during the setup ({s['hub_cpu_s']:.1f} s) over the connections",
        ),
        m(NAME, variant, "handshake_p50", s["handshake_p50_ms"] or 0.0, "ms", "connect to READY, under the load"),
        m(NAME, variant, "handshake_p99", s["handshake_p99_ms"] or 0.0, "ms"),
        m(
            NAME,
            variant,
            "first_byte_p50",
            fb["p50_ms"] or 0.0,
            "ms",
            f"{params['fetch_size']} B through OPEN; " + ", ".join(f"{k}: {v}" for k, v in fb["results"].items()),
        ),
        m(NAME, variant, "first_byte_p99", fb["p99_ms"] or 0.0, "ms"),
        m(NAME, variant, "mem_per_terminal", mem["per_terminal_kib"], "KiB", "per gateway: enrolled and its pool, PSS"),
        m(
            NAME,
            variant,
            "mem_per_enrolled_terminal",
            mem["config_per_terminal_kib"],
            "KiB",
            "per gateway: the config alone",
        ),
        m(
            NAME,
            variant,
            "mem_per_connection",
            mem["per_connection_kib"],
            "KiB",
            f"per idle pool connection ({mem['connections']:.0f} per gateway)",
        ),
        m(
            NAME,
            variant,
            "api_terminals_p50",
            api["p50_ms"] or 0.0,
            "ms",
            f"{api['terminals']} listed with the views of {', '.join(api.get('gateways') or [])}, {api['bytes']} B",
        ),
        m(NAME, variant, "api_terminals_p99", api["p99_ms"] or 0.0, "ms", f"{len(api['latency_ms'])} requests"),
        m(NAME, variant, "failover_pool_lost", fo["pool_lost"], "conn", f"{VICTIM}'s idle pool connections"),
        m(
            NAME,
            variant,
            "failover_flows_cut",
            fo["in_flight_lost"],
            "flows",
            f"started before the kill, of {fo['flows_before']}",
        ),
        m(
            NAME,
            variant,
            "failover_flows_failed",
            fo["failed_after"],
            "flows",
            f"started after the kill, of {fo['flows_after']}: "
            + ", ".join(f"{k}: {v}" for k, v in fo["failed_after_results"].items()),
        ),
        m(
            NAME,
            variant,
            "failover_recovered",
            fo["recovered_s"],
            "s",
            "kill to new flows completing in every bucket again (the last failure, the first of the victim's buckets)",
        ),
    ]
    if fo["table_s"] is not None:
        out.append(m(NAME, variant, "failover_table", fo["table_s"], "s", "kill to a terminal's new table"))
    if fo["moved_first_s"] is not None:
        out.append(
            m(
                NAME,
                variant,
                "failover_moved_first",
                fo["moved_first_s"],
                "s",
                f"first completed flow of {VICTIM}'s buckets at a survivor ({fo['moved_ok']} in all)",
            )
        )
    return out


def doc_extra(recs: list[records.Record]) -> str:
    """How to reproduce it, and the gateway's limits the figures sit against (the sizing: docs/operations.md)."""
    return (
        "Reproduce (root, FRR installed, one lab at a time): `flock /tmp/perigee-locks/netns.lock "
        ".venv/bin/python -m bench.run --full --only hub-scale` (about 3 min; `--quick` runs 60 terminals). "
        "Limits these figures sit against (`gateway/crates/perigee/src/gateway`): a hub config enrolls at most "
        "1,024 terminals (`config/limits.rs`, MAX_TERMINALS), and each hub worker keeps at most two fifths of its "
        "open-files limit as identified idle connections (`peer/admission.rs`, max_idle; past it new ones are "
        "reset): 26,214 under the packaged unit's LimitNOFILE of 65,536, but 8,000 on this machine, which caps "
        "every process at 20,000 files. So the hub gateways run `hub_workers` 3 here (SATLAB_HUB_WORKERS): "
        "24,000 idle connections (2 workers under the packaged unit hold 52,428) for the 16,000 of 1,000 packaged "
        "terminals. Sizing from these figures: "
        "docs/operations.md, *Sizing a hub for 10,000 terminals*. In the failover figure, fewer new flows start "
        "for a few seconds after the kill: the simulated terminals' own event loops are busy with the victim's "
        "closed connections, their reconnect attempts and their polls moving to a survivor (one Python process per "
        "250 terminals); the red bars are what failed. The fetches are 1 KB, so almost no flow is in flight at the "
        "kill (`failover_flows_cut`); what a gateway's failure does to long flows is measured in docs/cluster.md."
    )


def doc_tables(recs: list[records.Record]) -> str:
    """One row per figure (the generic table would be one very wide row), a column per run size."""
    variants = sorted({r.variant for r in recs if r.metric != records.SKIPPED}, key=lambda v: (len(v), v))
    by = {(r.metric, r.variant): r for r in recs}
    metrics = list(dict.fromkeys(r.metric for r in recs if r.metric != records.SKIPPED))
    lines = ["| figure | " + " | ".join(variants) + " | unit | note |", "|---" * (len(variants) + 3) + "|"]
    for metric in metrics:
        cells = [report.format_value(by[(metric, v)].value) if (metric, v) in by else "" for v in variants]
        last = next(by[(metric, v)] for v in reversed(variants) if (metric, v) in by)
        lines.append(f"| {metric} | " + " | ".join(cells) + f" | {last.unit} | {last.note} |")
    skipped = [r for r in recs if r.metric == records.SKIPPED]
    lines += [f"\nSkipped {r.variant}: {r.note}" for r in skipped]
    return "\n".join(lines)


def run(ctx: Context, params: dict[str, Any]) -> list[records.Record]:
    if os.geteuid() != 0:
        return [records.skipped(NAME, "all", "needs root (network namespaces)")]
    try:
        # The lab's gateways start in satlab's own process and in this one (the fleet's restart).
        os.environ["SATLAB_HUB_WORKERS"] = str(params["hub_workers"])
        with lab.running("geo-hts", gateway="both", overrides=LAB_ARGS, prefix=PREFIX):
            try:
                recs, raw = measure(ctx, params)
            finally:
                hubnet.sim_down(PREFIX, params["spaces"])  # whatever failed: the namespaces satlab does not know
            ctx.raw.setdefault(NAME, {})[f"T{params['terminals']}"] = raw
            return recs
    except (lab.LabUnavailable, procs.ToolError, RuntimeError, OSError) as e:
        return [records.skipped(NAME, f"T{params['terminals']}", str(e)[:300])]
    finally:
        os.environ.pop("SATLAB_HUB_WORKERS", None)
