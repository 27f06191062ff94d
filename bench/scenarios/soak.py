"""The fault-injection soak: mixed load through both gateways while faults strike on a schedule.

Opt-in (OPT_IN): `make soak` runs its full parameters, `make test` its short ones (through
`make -C bench soak-short`, which fails on any violation); `make bench` leaves it out.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench import lab, procs, records, report
from bench.context import Context
from bench.records import Record
from bench.soak import analysis, apifaults, controlplane, faults, gwprocs

NAME = "soak"
KIND = "soak"
OPT_IN = True
TITLE = "Fault-injection soak"
# `make soak` and the short run in `make test` use their own prefixes, so both can run at once.
PREFIXES = {"full": "sk-", "quick": "skq-"}
FAULTS_BIN = procs.REPO / "gateway/target/release/perigee-faults"
APPLY_STEPS = ("nft", "routes", "sysctl", "shaping", "dns", "squid", "hybla")
DESCRIPTION = (
    "satlab `leo` profile (100 Mbit/s both ways, 30 ms RTT; fast enough to move gigabytes in "
    "minutes) with BER 1e-6 (about 1.2 % of full-size frames lost) and bandwidth on demand (DAMA, "
    "CRA 40 Mbit/s + RBDC up to the carrier, Skyplex superframe and allocation delay; with a small CRA the lossy BoD "
    "link carried under 15 Mbit/s in total, too little for gigabytes), Perigee at both ends (peer path on) with the "
    "Squid cache, each daemon "
    "under satlab's copy of the packaged unit's restart policy (Restart=always, RestartSec=2). "
    "Load from the client: bulk downloads and uploads, short HTTP fetches past the cache, "
    "cacheable fetches (hits and misses), IPsec ESP packets, and every 100 ms a new short TCP "
    "transfer and a new HTTP fetch as recovery probes. Faults, in a loop until the time is up: "
    "SIGKILL of a worker (terminal, hub), a config apply that fails after each of its steps (the "
    "daemon's test-only hook, built only into `perigee-faults`), SIGKILL of Squid and of each "
    "master, a full filesystem under Squid's store (its own tmpfs), the satellite link down "
    "(every frame lost), and the terminal namespace's routes deleted (then the config re-applied). "
    "Every completed transfer is compared byte for byte with the lab's fixed stream and its "
    "sha256 checked; broken transfers (ended early by a fault) are counted, never verified. "
    "Recovery: from the fault (or the end of a lasting condition) until a probe of each kind "
    "started after it completed intact. The control plane runs too: the API (`python -m "
    "perigee_api`, collector on) on the hub gateway's control socket, its SQLite database on a "
    "64 MiB tmpfs of its own, under the same restart policy; an admin reads every 0.5 s (health, "
    "live flows, a time series) and every 10 s stores and applies a config version (the splitter's "
    "idle timeout moved by one second). Its faults: SIGKILL of the API, and the disk under its "
    "database full (0 bytes free) while reads, writes and the collector go on."
)
PARAMS: dict[str, dict[str, Any]] = {
    "quick": {
        "duration_s": 400,
        "warmup_s": 8,
        "gap_s": 5,
        "link_down_s": 5,
        "disk_full_s": 5,
        "routes_hold_s": 3,
        "idle_timeout_s": 10,
        "bulk_bytes": 4 << 20,
        "bulk_down": 4,
        "bulk_up": 2,
        "web": 3,
        "stall_timeout_s": 60,
        "cycles": 1,
    },
    "full": {
        "duration_s": 1500,
        "warmup_s": 20,
        "gap_s": 40,
        "link_down_s": 30,
        "disk_full_s": 30,
        "routes_hold_s": 10,
        "idle_timeout_s": 30,
        "bulk_bytes": 32 << 20,
        "bulk_down": 10,
        "bulk_up": 8,
        "web": 4,
        "stall_timeout_s": 60,
        "cycles": 0,
    },
}
LINK_ARGS = ["--ber", "1e-6", "--bod", "on", "--bod-cra", "40M"]


class SoakFailure(RuntimeError):
    """The soak saw corruption, a hung flow, a broken invariant, or new flows not served again at all."""


def store_mount(prefix: str) -> str:
    return f"/run/satlab/{prefix}/squid-{prefix}terminal"


@contextlib.contextmanager
def squid_store_tmpfs(prefix: str, size_mb: int = 400) -> Iterator[str]:
    """A filesystem of its own under the terminal Squid's state dir, so filling it harms nothing
    else (satlab's run dir is on the host's /run)."""
    path = store_mount(prefix)
    mounted = False
    try:
        with faults.tmpfs(path, size_mb, "0755", "soak-squid"):
            mounted = True
            yield path
    finally:
        # Once unmounted: the run dir goes too unless a lab still has it.
        run_dir = os.path.dirname(path)
        if mounted and not os.path.exists(os.path.join(run_dir, "state.json")):
            shutil.rmtree(run_dir, ignore_errors=True)


@contextlib.contextmanager
def lab_env(extra: dict[str, str]) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def schedule(p: dict[str, Any]) -> list[tuple[str, str]]:
    """One cycle of faults: (action, argument)."""
    cycle = [("kill-worker", "terminal"), ("kill-worker", "hub")]
    cycle += [("apply-fail", step) for step in APPLY_STEPS]
    cycle += [
        ("kill-squid", "terminal"),
        ("kill-master", "terminal"),
        ("kill-master", "hub"),
        ("squid-disk-full", ""),
        ("kill-api", "hub"),
        ("api-disk-full", "hub"),
        ("link-down", ""),
        ("routes-lost", "terminal"),
    ]
    return cycle


@dataclass
class ControlPlane:
    """The soak's API, the admin session the faults use, and the control-plane load."""

    api: controlplane.Api
    client: httpx.Client
    load: controlplane.Load


@contextlib.contextmanager
def control_plane(gw: faults.Gateways, idle_timeout_s: int) -> Iterator[ControlPlane]:
    """The API on the hub: the terminal's control socket is the one the apply-fail and routes-lost
    faults drive directly, so the API's own applies go to the other gateway and never race them."""
    api = controlplane.Api(gw.run_dir, gw.sock("hub"))
    with (
        # The API's data dir on a filesystem of its own, so filling it harms nothing else.
        faults.tmpfs(str(api.data_dir), controlplane.DATA_MB, "0700", "soak-api"),
        controlplane.running(api),
        api.client(timeout=controlplane.WRITE_TIMEOUT_S) as client,
    ):
        api.log_in(client)
        load = controlplane.Load(api, idle_timeout_s)
        load.start()
        try:
            yield ControlPlane(api, client, load)
        finally:
            load.stop()


def strike(
    action: str,
    arg: str,
    lb: lab.Lab,
    gw: faults.Gateways,
    cp: ControlPlane,
    p: dict[str, Any],
    fault_file: str,
) -> faults.FaultEvent:
    if action == "kill-worker":
        return faults.kill_worker(gw, arg)
    if action == "kill-master":
        ev = faults.kill_master(gw, arg)
        ev.detail["back_healthy"] = gw.wait_healthy(arg, faults.HUNG_S)
        ev.detail["healthy_after_s"] = round(time.monotonic() - ev.t, 2)
        if arg == "hub":
            # The terminal's warm peer pool reconnects to the new hub by itself; give it time.
            gw.wait_healthy("terminal", 10.0)
        return ev
    if action == "kill-squid":
        return faults.kill_squid(gw, arg)
    if action == "apply-fail":
        with cp.api.write_lock:  # the fault hook's step file is read by both daemons
            return faults.apply_fail(gw, "terminal", arg, fault_file)
    if action == "kill-api":
        return apifaults.kill_api(cp.api, cp.client, list(cp.load.written))
    if action == "api-disk-full":
        return apifaults.api_disk_full(cp.api, cp.client, p["idle_timeout_s"], p["disk_full_s"])
    if action == "squid-disk-full":
        return faults.squid_disk_full(store_mount(lb.prefix), p["disk_full_s"])
    if action == "link-down":
        return faults.link_down(lb, p["link_down_s"])
    if action == "routes-lost":
        return faults.routes_lost(lb, gw, arg, p["routes_hold_s"])
    raise ValueError(action)


def soak_config(cfg: dict[str, Any], idle_timeout_s: int) -> dict[str, Any]:
    cfg = dict(cfg)
    cfg["splitter"] = dict(cfg.get("splitter", {}), idle_timeout_s=idle_timeout_s)
    cfg["revision"] = f"soak-{time.time_ns()}"
    return cfg


def read_records(path: str) -> list[dict[str, Any]]:
    out = []
    with open(path) as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line))
    return out


def run(ctx: Context, p: dict[str, Any]) -> list[Record]:
    if os.geteuid() != 0:
        raise lab.LabUnavailable("the soak needs root (satlab namespaces, tmpfs, SIGKILL of the daemons)")
    if not os.access(FAULTS_BIN, os.X_OK):
        raise lab.LabUnavailable(f"{FAULTS_BIN} is not built (make -C gateway build-faults)")
    prefix = os.environ.get("SOAK_PREFIX") or PREFIXES[ctx.mode]
    run_dir = f"/run/satlab/{prefix}"
    fault_file = f"{run_dir}/soak-apply-fault"
    env = {
        "SATLAB_GATEWAY_CACHE": "1",
        "SATLAB_GATEWAY_RESTART": "always",
        "SATLAB_GATEWAY_BIN": str(FAULTS_BIN),
        "PERIGEE_FAULT_APPLY_STEP_FILE": fault_file,
    }
    lab.down(prefix)
    with (
        lab_env(env),
        squid_store_tmpfs(prefix),
        lab.running("leo", gateway="both", overrides=LINK_ARGS, prefix=prefix) as lb,
    ):
        return soak(ctx, p, lb, fault_file)


def soak(ctx: Context, p: dict[str, Any], lb: lab.Lab, fault_file: str) -> list[Record]:
    gw = faults.Gateways(lb)
    roles = ("terminal", "hub")
    for role in roles:
        status, reply = gw.put_config(role, soak_config(gw.config(role), p["idle_timeout_s"]))
        if status != 200:
            raise SoakFailure(f"soak config on {role}: {status} {reply}")
    baseline = {r: gwprocs.footprint(gw.master(r)) for r in roles}
    ctx.log(f"soak baseline footprint: {baseline}")
    with control_plane(gw, p["idle_timeout_s"]) as cp:
        return run_load(ctx, p, lb, gw, cp, fault_file, baseline)


def run_load(
    ctx: Context,
    p: dict[str, Any],
    lb: lab.Lab,
    gw: faults.Gateways,
    cp: ControlPlane,
    fault_file: str,
    baseline: dict[str, gwprocs.Footprint],
) -> list[Record]:
    roles = ("terminal", "hub")
    out_path = f"/run/satlab/{lb.prefix}/soak-transfers.jsonl"
    stop_file = f"/run/satlab/{lb.prefix}/soak-stop"
    esp_rx = procs.Background(
        lb.exec_argv(
            "server",
            procs.tool_argv(
                "bench.soak.esp",
                "recv",
                "--duration",
                str(p["duration_s"] + 10),
                "--stop-file",
                stop_file,
            ),
        )
    )
    esp_tx = procs.Background(
        lb.exec_argv(
            "client",
            procs.tool_argv(
                "bench.soak.esp",
                "send",
                "--duration",
                str(p["duration_s"]),
                "--stop-file",
                stop_file,
            ),
        )
    )
    load = procs.Background(
        lb.exec_argv(
            "client",
            procs.tool_argv(
                "bench.soak.load",
                "--duration",
                str(p["duration_s"]),
                "--out",
                out_path,
                "--bulk-down",
                str(p["bulk_down"]),
                "--bulk-up",
                str(p["bulk_up"]),
                "--bulk-bytes",
                str(p["bulk_bytes"]),
                "--web",
                str(p["web"]),
                "--stall-timeout",
                str(p["stall_timeout_s"]),
                "--stop-file",
                stop_file,
            ),
        )
    )
    t_start = time.monotonic()
    events: list[faults.FaultEvent] = []
    try:
        time.sleep(p["warmup_s"])
        cycle = schedule(p)
        k = 0
        # Full: cycle until the load's time is nearly up; quick: `cycles` cycles.
        while True:
            if p["cycles"] and k >= p["cycles"] * len(cycle):
                break
            left = p["duration_s"] - (time.monotonic() - t_start)
            if not p["cycles"] and left < p["gap_s"] + p["link_down_s"] + 10:
                break
            action, arg = cycle[k % len(cycle)]
            t_fault = time.monotonic()
            try:
                ev = strike(action, arg, lb, gw, cp, p, fault_file)
            except Exception as e:  # noqa: BLE001  (a fault the harness could not carry out is a finding)
                ev = faults.FaultEvent(
                    f"{action}:{arg}",
                    action,
                    t_fault,
                    detail={"harness_error": f"{type(e).__name__}: {e}"[:300]},
                )
            ctx.log(f"fault {ev.name}: {ev.detail if action != 'routes-lost' else ''}")
            events.append(ev)
            time.sleep(p["gap_s"])
            if action == "routes-lost":
                faults.restore_routes(lb, arg, ev.detail.pop("deleted_routes"))
                time.sleep(1.0)
            k += 1
        Path(stop_file).touch()  # the schedule is done: the load finishes what it started
        summary = load.result(timeout=p["duration_s"] + 4 * p["stall_timeout_s"] + 120)
        t_load_end = time.monotonic()
    finally:
        load.close()
        cp.load.stop()
        esp_tx_res = _result_or(esp_tx, 60)
        esp_rx_res = _result_or(esp_rx, 60)
    # Flows the gateways still hold after their idle timeout: hung.
    deadline = time.monotonic() + p["idle_timeout_s"] + faults.HUNG_S
    hung_gw = {r: -1 for r in roles}
    while time.monotonic() < deadline:
        hung_gw = {r: gw.live_flows(r) for r in roles}
        if not any(hung_gw.values()):
            break
        time.sleep(1.0)
    after = {r: gwprocs.footprint(gw.master(r)) for r in roles}
    live = {r: gw.request(r, "GET", "/v1/flows?state=live")[1] for r in roles if hung_gw.get(r)}
    if live:
        ctx.log(f"soak: flows still live after the idle timeout: {json.dumps(live)[:3000]}")
    # At the end: the API's active version is what the hub runs.
    final_state, _ = apifaults.wait_in_sync(cp.api, cp.client, apifaults.RECONCILE_WITHIN_S)
    keep_artefacts(ctx, lb)
    recs = read_records(out_path)
    return summarize(
        ctx,
        p,
        recs,
        events,
        summary,
        hung_gw,
        baseline,
        after,
        esp_tx_res,
        esp_rx_res,
        t_load_end,
        control=(cp.load.calls, final_state),
    )


ARTEFACTS = Path("/tmp/perigee-soak")


def keep_artefacts(ctx: Context, lb: lab.Lab) -> None:
    """The transfer records and the daemons' logs outlive the lab (satlab down removes its run
    dir), for a look at what went wrong; never committed."""
    dest = ARTEFACTS / f"{lb.prefix}{ctx.mode}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    dest.mkdir(parents=True, exist_ok=True)
    run_dir = Path(f"/run/satlab/{lb.prefix}")
    for name in (
        "soak-transfers.jsonl",
        f"gw-{lb.ns('terminal')}.log",
        f"gw-{lb.ns('hub')}.log",
        "api.log",
    ):
        if (run_dir / name).exists():
            shutil.copy(run_dir / name, dest / name)
    ctx.log(f"soak: records and logs kept in {dest}")


def _result_or(bg: procs.Background, timeout: float) -> dict[str, Any]:
    try:
        res: dict[str, Any] = bg.result(timeout=timeout)
        return res
    except (procs.ToolError, ValueError) as e:
        return {"error": str(e)[:300]}
    finally:
        bg.close()


def summarize(
    ctx: Context,
    p: dict[str, Any],
    recs: list[dict[str, Any]],
    events: list[faults.FaultEvent],
    summary: dict[str, Any],
    hung_gw: dict[str, int],
    baseline: dict[str, gwprocs.Footprint],
    after: dict[str, gwprocs.Footprint],
    esp_tx: dict[str, Any],
    esp_rx: dict[str, Any],
    t_end: float,
    control: tuple[list[controlplane.Call], dict[str, Any]] | None = None,
) -> list[Record]:
    out: list[Record] = []
    violations: list[str] = []
    tot = analysis.totals(recs)

    def m(variant: str, metric: str, value: float, unit: str, note: str = "") -> None:
        out.append(records.measured(NAME, variant, metric, value, unit, note))

    m("totals", "transfers_verified", tot.transfers, "")
    m("totals", "bytes_verified", tot.verified_bytes / 1e9, "GB")
    m("totals", "corrupted_bytes", tot.corrupted_bytes, "B")
    m(
        "totals",
        "broken_transfers",
        tot.broken,
        "",
        "ended early by a fault; not verified",
    )
    m("totals", "cache_hits", tot.cache_hits, "")
    hung = int(summary.get("hung_client_flows", 0)) + sum(max(0, v) for v in hung_gw.values())
    m(
        "totals",
        "hung_flows",
        hung,
        "",
        "client flows never ended + gateway flows left after idle timeout",
    )
    m("totals", "faults_injected", len(events), "")
    m("totals", "esp_sent", float(esp_tx.get("sent", 0)), "pkt")
    m("totals", "esp_received_intact", float(esp_rx.get("intact", 0)), "pkt")
    m("totals", "esp_altered", float(esp_rx.get("altered", 0)), "pkt")
    if tot.corrupted_bytes:
        violations.append(f"{tot.corrupted_bytes} corrupted bytes")
    if hung:
        violations.append(f"{hung} hung flows (client {summary.get('hung_client_flows')}, gateways {hung_gw})")
    if esp_rx.get("altered"):
        violations.append(f"{esp_rx['altered']} ESP packets altered")
    if "error" in esp_rx or not esp_rx.get("intact"):
        violations.append(f"no intact ESP packet crossed: {esp_rx}")
    for role, b in baseline.items():
        a = after[role]
        m(f"footprint {role}", "fds_baseline", b.fds, "")
        m(f"footprint {role}", "fds_after", a.fds, "")
        m(f"footprint {role}", "rss_baseline", b.rss_kib / 1024, "MiB")
        m(f"footprint {role}", "rss_after", a.rss_kib / 1024, "MiB")
        m(f"footprint {role}", "processes_after", a.processes, "")
        m(f"footprint {role}", "squid_rss_baseline", b.squid_rss_kib / 1024, "MiB")
        m(f"footprint {role}", "squid_rss_after", a.squid_rss_kib / 1024, "MiB")
    # Probes before the first fault: what "served" takes on this lossy link without any fault.
    first_fault = events[0].t if events else t_end
    quiet = sorted(
        r["t1"] - r["t0"] for r in recs if r["kind"] in analysis.PROBES and r["sha256_ok"] and r["t1"] < first_fault
    )
    if quiet:
        m("quiet probes", "p50", quiet[len(quiet) // 2], "s")
        m(
            "quiet probes",
            "p99",
            quiet[min(len(quiet) - 1, int(len(quiet) * 0.99))],
            "s",
        )
        m("quiet probes", "max", quiet[-1], "s")
        m("quiet probes", "count", len(quiet), "")
    # Per fault: recovery until the next fault (daemon faults) or the end of the load (lasting
    # conditions: whether and when the gateway served again at all), reported beside its target.
    # The soak fails only when new flows were not served again at all: within HUNG_S of the fault
    # (later faults notwithstanding), or for a lasting condition before the end of the load.
    worst: dict[str, list[float]] = {}
    restarts: dict[str, list[float]] = {}  # a killed master: until it is healthy (splitting) again
    for i, ev in enumerate(events):
        daemon_fault = ev.kind in faults.TARGETS_S
        until = events[i + 1].t if i + 1 < len(events) and daemon_fault else t_end
        rec = analysis.recovery(recs, ev.t_ref, until)
        if rec.worst_s is None:
            out.append(
                records.missing(
                    NAME,
                    ev.name,
                    "recovery",
                    "s",
                    f"no intact probe of each kind in its window (tcp {rec.tcp_s}, http {rec.http_s})",
                )
            )
        else:
            worst.setdefault(ev.name, []).append(rec.worst_s)
        if daemon_fault or ev.kind in ("link-down", "squid-disk-full"):
            horizon = min(t_end, ev.t_ref + faults.HUNG_S) if daemon_fault else t_end
            if analysis.recovery(recs, ev.t_ref, horizon).worst_s is None:
                violations.append(f"{ev.name}: new flows not served again within {horizon - ev.t_ref:.0f} s")
        if "harness_error" in ev.detail:
            violations.append(f"{ev.name}: {ev.detail['harness_error']}")
        if ev.kind == "kill-master" and not ev.detail.get("back_healthy"):
            violations.append(f"{ev.name}: the daemon was not healthy again within {faults.HUNG_S:g} s")
        if ev.kind == "apply-fail" and not ev.detail.get("rolled_back"):
            violations.append(f"{ev.name}: apply not refused and rolled back: {ev.detail}")
        if ev.kind in apifaults.KINDS:
            violations += apifaults.problems(ev)
            # The API is not in the data path: no probe may fail while it is killed or its disk full.
            if rec.failed_probes:
                violations.append(f"{ev.name}: {rec.failed_probes} probes failed (the data plane noticed)")
            ev.detail["probes_failed"] = rec.failed_probes
    # One row per fault (several cycles: the worst and the count).
    for ev in events:
        if "healthy_after_s" in ev.detail:
            restarts.setdefault(ev.name, []).append(float(ev.detail["healthy_after_s"]))
    for name, vals in worst.items():
        kind = next(e.kind for e in events if e.name == name)
        target = faults.TARGETS_S.get(kind)
        m(name, "recovery_worst", max(vals), "s")
        m(name, "recovery_median", sorted(vals)[len(vals) // 2], "s")
        m(name, "times", len(vals), "")
        if target is not None:
            # The target (the metric's name is older: the published records use it).
            m(name, "bound", target, "s")
        if name in restarts:
            m(
                name,
                "healthy_again_worst",
                max(restarts[name]),
                "s",
                "the restarted daemon splitting again; new flows are routed unsplit meanwhile",
            )
    control_totals = None
    if control is not None:
        control_totals = summarize_control(m, events, control[0], control[1], violations)
    out += summarize_api_faults(events)
    ctx.raw["soak"] = {
        "events": [{"name": e.name, "t": e.t, "t_restored": e.t_restored, "detail": e.detail} for e in events],
        "load_summary": summary,
        "esp": [esp_tx, esp_rx],
        "hung_gateway_flows": hung_gw,
        "violations": violations,
        "by_kind": tot.by_kind,
        "control_plane": dataclasses.asdict(control_totals) if control_totals else None,
    }
    m("totals", "violations", len(violations), "", "; ".join(violations)[:300])
    ctx.log(
        f"soak: {tot.transfers} transfers, {tot.verified_bytes / 1e9:.2f} GB verified, "
        f"{tot.corrupted_bytes} corrupted bytes, {hung} hung flows, {tot.broken} broken, "
        f"violations: {violations or 'none'}"
    )
    if ctx.mode == "quick" and violations:
        raise SoakFailure("; ".join(violations))
    return out


def _key(key: str) -> Callable[[dict[str, Any]], float | None]:
    return lambda d: d.get(key)


# Per control-plane fault, what apifaults measured (the worst over the soak's cycles): metric, unit,
# and its value from an event's detail.
API_FAULT_METRICS: dict[str, list[tuple[str, str, Callable[[dict[str, Any]], float | None]]]] = {
    "kill-api": [
        ("api_answering_again_worst", "s", _key("api_back_s")),
        ("restart_delay_worst", "s", _key("restart_delay_s")),
        ("api_start_worst", "s", _key("start_s")),
        ("api_start_cpu_worst", "s", _key("start_cpu_s")),
        ("in_sync_after_worst", "s", _key("in_sync_after_s")),
        ("versions_missing", "", lambda d: len(d.get("versions_missing", []))),
        ("probes_failed", "", _key("probes_failed")),
    ],
    "api-disk-full": [
        ("reads_not_200", "", lambda d: sum(v for k, v in d["reads"].items() if k != "200")),
        ("writes_stored_while_full", "", lambda d: d["writes"].get("200 stored", 0)),
        (
            "writes_refused_507_503",
            "",
            lambda d: sum(v for k, v in d["writes"].items() if k.startswith(("507 ", "503 "))),
        ),
        (
            "writes_other_answers",
            "",
            lambda d: sum(v for k, v in d["writes"].items() if not k.startswith(("200 ", "507 ", "503 "))),
        ),
        ("write_stored_again_worst", "s", _key("write_back_s")),
        ("collector_storing_again_worst", "s", _key("collector_back_s")),
        ("integrity_check_not_ok", "", lambda d: int(d.get("integrity") != "ok")),
        ("versions_half_written", "", lambda d: len(d.get("half_written", []))),
        ("probes_failed", "", _key("probes_failed")),
    ],
}


def summarize_api_faults(events: list[faults.FaultEvent]) -> list[Record]:
    """One record per control-plane fault and measure: the worst of its cycles (none when a cycle
    never got there)."""
    out: list[Record] = []
    for kind, metrics in API_FAULT_METRICS.items():
        evs = [e for e in events if e.kind == kind]
        # A fault the harness could not carry out measured nothing.
        details = [e.detail for e in evs if "harness_error" not in e.detail]
        if not details:
            continue
        name = evs[0].name
        for metric, unit, value in metrics:
            got = [value(d) for d in details]
            if any(x is None for x in got):
                out.append(records.missing(NAME, name, metric, unit, "not reached in one cycle"))
            else:
                out.append(records.measured(NAME, name, metric, max(float(x or 0) for x in got), unit))
        if kind == "kill-api":
            out.append(
                records.measured(
                    NAME,
                    name,
                    "api_start_cpu_bound",
                    apifaults.START_CPU_TARGET_S,
                    "s",
                    "target; and the restart delay at most RestartSec 2 s + 1 s",
                )
            )
    return out


def summarize_control(
    m: Callable[..., None],
    events: list[faults.FaultEvent],
    calls: list[controlplane.Call],
    final_state: dict[str, Any],
    violations: list[str],
) -> analysis.ControlTotals:
    # While the API is killed (until an authenticated read answered again, plus a margin) no answer
    # is expected.
    down = [(e.t, e.t + float(e.detail.get("api_back_s") or 60.0) + 0.5) for e in events if e.kind == "kill-api"]
    ct = analysis.control_plane(calls, down)
    v = "control plane"
    m(v, "reads", ct.reads, "")
    m(v, "reads_ok", ct.reads_ok, "")
    if ct.read_p99_s is not None:
        m(v, "read_p99", ct.read_p99_s, "s")
    m(v, "versions_stored", ct.stored, "")
    m(v, "applies_ok", ct.applied, "")
    m(
        v,
        "writes_refused",
        sum(ct.refused.values()),
        "",
        ", ".join(f"{k}: {n}" for k, n in sorted(ct.refused.items()))[:200],
    )
    m(v, "server_errors", ct.server_errors, "", "HTTP 500")
    m(v, "hung_requests", ct.hung, "")
    if ct.server_errors:
        violations.append(f"control plane: {ct.server_errors} HTTP 500 answers")
    if ct.hung:
        violations.append(f"control plane: {ct.hung} requests hung")
    if ct.bad_outside_down:
        violations.append(
            f"control plane: {len(ct.bad_outside_down)} failed requests while the API was up, e.g. "
            f"{ct.bad_outside_down[:3]}"
        )
    if not apifaults.in_sync(final_state):
        violations.append(f"control plane at the end: the active version is not what the hub runs: {final_state}")
    return ct


def control_tables(recs: list[Record]) -> list[str]:
    """The control plane's load over the whole soak, and what each of its faults left."""
    lines: list[str] = []
    load = [r for r in recs if r.variant == "control plane"]
    if load:
        lines += ["", "| control-plane load | value |", "|---|---|"]
        for r in load:
            lines.append(f"| {_label(r)} | {_fmt(r)} |")
    rows = [
        r
        for r in recs
        if r.variant.startswith(apifaults.KINDS)
        and r.metric not in ("recovery", "recovery_worst", "recovery_median", "times", "bound")
    ]
    if rows:
        lines += [
            "",
            "| control-plane fault | measure (worst over the cycles) | value |",
            "|---|---|---|",
        ]
        for r in rows:
            lines.append(f"| {r.variant} | {_label(r)} | {_fmt(r)} |")
    return lines


def doc_extra(recs: list[Record]) -> str:
    return (
        "Target for every daemon fault: 1 s (the `target [s]` column; the times are this machine's, so a "
        "recovery slower than its target is reported, not a violation: the soak fails on corruption, a "
        f"hung flow, a rollback or an invariant broken, and on new flows not served again within "
        f"{faults.HUNG_S:g} s). While a master is down its "
        "workers are gone too and the nft rules stay: new flows are routed unsplit (fail-open), so they "
        "are served at once; the last column says when the restarted daemon was splitting again. "
        "Recovery after the link, the disk and the routes is measured from the end of the condition "
        "(for the routes: the config re-applied) until the end of the run. "
        "The control plane's faults (kill-api, api-disk-full) must not touch the data plane: their "
        "recovery is measured from the fault itself, and any probe failing in their window is a "
        "violation. The API killed: the supervisor starts it again after RestartSec (2 s, never "
        f"before; target: at most 1 s late) and its start should take at most "
        f"{apifaults.START_CPU_TARGET_S:g} s of CPU until an authenticated read answers (targets: the "
        "restart delay, the start's wall time and CPU are reported beside them), every version it "
        "confirmed before the kill is still listed, and its active version is the revision the hub "
        "runs. Its disk full (0 bytes free, the control-plane load going on): every read answers "
        "200, every write is stored whole or refused with 507/503 in the API's error shape (never a "
        "500, never hung), the API process neither dies nor restarts; once space is back a write "
        f"succeeds (target: within {apifaults.WRITE_BACK_TARGET_S:g} s), the collector stores again "
        f"(target: within {apifaults.COLLECTOR_BACK_TARGET_S:g} s), `PRAGMA integrity_check` is ok, no "
        "refused write left a version and every version reads back whole."
    )


def _label(r: Record) -> str:
    """A table row's name for a record: its metric, unit and note."""
    unit = f" [{r.unit}]" if r.unit else ""
    note = f" ({r.note})" if r.note else ""
    return f"{r.metric.replace('_', ' ')}{unit}{note}"


def _value(recs: list[Record], variant: str, metric: str) -> Record | None:
    return next((r for r in recs if r.variant == variant and r.metric == metric), None)


def _fmt(rec: Record | None) -> str:
    if rec is None:
        return ""
    if rec.value is not None and rec.value == int(rec.value) and rec.unit in ("", "B", "pkt"):
        return f"{int(rec.value):,}"  # a count
    text = report.format_value(rec.value)
    return f"{text} ({rec.note})" if rec.value is None and rec.note else text


def doc_tables(recs: list[Record]) -> str:
    """Three tables: totals, recovery per fault, the daemons' footprint before and after."""
    lines = ["| totals | value |", "|---|---|"]
    for r in recs:
        if r.variant == "totals" and r.metric != records.SKIPPED:
            lines.append(f"| {_label(r)} | {_fmt(r)} |".replace("\n", " "))
    lines += [
        "",
        "| fault | times | not served again in its window | recovery median [s] | recovery worst [s] | target [s] | "
        "daemon healthy again, worst [s] |",
        "|---|---|---|---|---|---|---|",
    ]
    faults_seen = [
        v
        for v in dict.fromkeys(r.variant for r in recs)
        if v not in ("totals", "quiet probes", "control plane") and not v.startswith("footprint")
    ]
    for v in faults_seen:
        missing = _value(recs, v, "recovery")
        # Each time a fault found no intact probe of each kind in its window is a `recovery`
        # record without a value; `times` counts the others.
        failed = sum(1 for r in recs if r.variant == v and r.metric == "recovery" and r.value is None)
        ok = _value(recs, v, "times")
        total = failed + (int(ok.value) if ok is not None and ok.value is not None else 0)
        lines.append(
            f"| {v} | {total} | {failed} | {_fmt(_value(recs, v, 'recovery_median'))} | "
            f"{_fmt(_value(recs, v, 'recovery_worst')) or _fmt(missing)} | {_fmt(_value(recs, v, 'bound'))} | "
            f"{_fmt(_value(recs, v, 'healthy_again_worst'))} |"
        )
    lines += control_tables(recs)
    q = {k: _fmt(_value(recs, "quiet probes", k)) for k in ("count", "p50", "p99", "max")}
    if q["count"]:
        lines += [
            "",
            (
                f"Probes before the first fault ({q['count']}): p50 {q['p50']} s, p99 {q['p99']} s, "
                f"max {q['max']} s: a new flow's time on this lossy link with no fault at all."
            ),
        ]
    lines += [
        "",
        "| gateway | processes after | fds before | fds after | RSS before [MiB] | RSS after [MiB] "
        "| of which Squid before [MiB] | of which Squid after [MiB] |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for role in ("terminal", "hub"):
        v = f"footprint {role}"
        if _value(recs, v, "fds_baseline") is None:
            continue
        lines.append(
            f"| {role} | {_fmt(_value(recs, v, 'processes_after'))} | {_fmt(_value(recs, v, 'fds_baseline'))} | "
            f"{_fmt(_value(recs, v, 'fds_after'))} | {_fmt(_value(recs, v, 'rss_baseline'))} | "
            f"{_fmt(_value(recs, v, 'rss_after'))} | {_fmt(_value(recs, v, 'squid_rss_baseline'))} | "
            f"{_fmt(_value(recs, v, 'squid_rss_after'))} |"
        )
    for r in recs:
        if r.metric == records.SKIPPED:
            lines.append(f"\n- skipped `{r.variant}`: {r.note}")
    return "\n".join(lines)
