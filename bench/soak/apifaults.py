"""The soak's faults of the control plane: SIGKILL of the API, and the disk under its database full.

Neither may touch the data plane (the API is not in the data path: the soak's probes must keep
succeeding); what each must leave behind is checked here and written into the FaultEvent's detail,
which the soak turns into violations (`problems`)."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx

from bench.soak.controlplane import READ_TIMEOUT_S, RESTART_SEC, Api
from bench.soak.faults import FILLER, HUNG_S, FaultEvent, fill
from bench.tools import cpu

# The API killed: the supervisor restarts it after RestartSec, and its start (imports, migrations, the
# first admin's check, asking the gateway which config it runs: about 1.5 s of CPU) should take at most
# START_CPU_TARGET_S of CPU until an authenticated read answers. Targets, reported beside the figures
# (the restart delay, the start's wall time and CPU): how long a process takes on a shared machine is
# the machine's, so none of them fails the soak. It fails when the API never answers again (HUNG_S).
START_CPU_TARGET_S = 3.0
API_BACK_WITHIN_S = HUNG_S
# After the disk has space again: a write should succeed within WRITE_BACK_TARGET_S, without a restart
# (the API retries nothing itself: the first write after the space is back is the test), and the
# collector should store history again within its longest back-off (8 s) plus a tick. Targets again;
# never within HUNG_S fails the soak.
WRITE_BACK_TARGET_S = 3.0
COLLECTOR_BACK_TARGET_S = 10.0
# Where the running config is compared with the API's versions: after a restart the API reconciles at
# once; after a full disk the collector does so within its next check (every 5 s) after its back-off.
# Not in sync within HUNG_S: drift.
RECONCILE_WITHIN_S = HUNG_S
# The control-plane faults (FaultEvent.kind).
KINDS = ("kill-api", "api-disk-full")


def _get(c: httpx.Client, path: str) -> tuple[int, Any]:
    try:
        r = c.get(path, timeout=READ_TIMEOUT_S)
        return r.status_code, r.json()
    except (httpx.HTTPError, ValueError) as e:
        return 0, {"transport_error": type(e).__name__}


def versions_and_running(api: Api, c: httpx.Client) -> dict[str, Any]:
    """The version ids the API lists, its active version and whether that is what the gateway runs
    (the active version's revision equals the gateway's running revision)."""
    with api.write_lock:
        s1, listed = _get(c, "/api/v1/versions?limit=500")
        s2, run = _get(c, "/api/v1/config/running")
        active = listed.get("active_version_id") if s1 == 200 else None
        s3, act = _get(c, f"/api/v1/versions/{active}") if active else (0, {})
    return {
        "ids": [v["id"] for v in listed.get("versions", [])] if s1 == 200 else None,
        "total": listed.get("total") if s1 == 200 else None,
        "active": active,
        "running_version": run.get("version_id") if s2 == 200 else None,
        "running_revision": run.get("revision") if s2 == 200 else None,
        "active_revision": (act.get("config") or {}).get("revision") if s3 == 200 else None,
        "status": [s1, s2, s3],
    }


def in_sync(state: dict[str, Any]) -> bool:
    return (
        state["active"] is not None
        and state["active"] == state["running_version"]
        and state["active_revision"] == state["running_revision"]
    )


def wait_in_sync(api: Api, c: httpx.Client, timeout: float) -> tuple[dict[str, Any], float | None]:
    t0 = time.monotonic()
    while True:
        state = versions_and_running(api, c)
        if in_sync(state):
            return state, time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            return state, None
        time.sleep(0.5)


def _stat(pid: int | None) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (field 3 onwards)."""
    if pid is None:
        return None
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _started_at(pid: int | None) -> float | None:
    """When the process started, on CLOCK_BOOTTIME (/proc's clock)."""
    f = _stat(pid)
    return int(f[19]) / os.sysconf("SC_CLK_TCK") if f else None


def _cpu_s(pid: int | None) -> float | None:
    """CPU seconds the process has used (user + system)."""
    if pid is None:
        return None
    try:
        return cpu.cpu_ticks(pid) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError):
        return None


def kill_api(api: Api, c: httpx.Client, written_before: list[int]) -> FaultEvent:
    """SIGKILL the API; recovery: until an authenticated read answers 200 again (the supervisor
    restarts it after RestartSec). Then every version the API confirmed before the kill must still be
    listed, and the active version must be what the gateway runs."""
    pid = api.pid()
    if pid is None:
        raise RuntimeError("no API process to kill")
    t = time.monotonic()
    t_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
    os.kill(pid, signal.SIGKILL)
    back = api.wait_answering(c, API_BACK_WITHIN_S)
    new_pid = api.pid()
    cpu = _cpu_s(new_pid) if new_pid != pid else None
    # Where the time went: the supervisor's delay (RestartSec) and the new process's start.
    started = _started_at(new_pid) if new_pid != pid else None
    delay = started - t_boot if started is not None else None
    start = back - delay if back is not None and delay is not None else None
    state, sync_s = wait_in_sync(api, c, RECONCILE_WITHIN_S)
    listed = set(state["ids"] or [])
    missing = [v for v in written_before if v not in listed and v > min(listed, default=0)]
    return FaultEvent(
        "kill-api@hub",
        "kill-api",
        t,
        detail={
            "pid": pid,
            "new_pid": new_pid,
            "api_back_s": round(back, 2) if back is not None else None,
            "restart_delay_s": round(delay, 2) if delay is not None else None,
            "start_s": round(start, 2) if start is not None else None,
            "start_cpu_s": round(cpu, 2) if cpu is not None else None,
            "versions_confirmed_before": len(written_before),
            "versions_missing": missing,
            "active_version": state["active"],
            "running_version": state["running_version"],
            "in_sync_after_s": round(sync_s, 2) if sync_s is not None else None,
        },
    )


def integrity(db_path: str) -> str:
    con = sqlite3.connect(db_path, timeout=30)
    try:
        return str(con.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        con.close()


def api_disk_full(api: Api, c: httpx.Client, idle_timeout_s: int, hold_s: float) -> FaultEvent:
    """Fill the tmpfs under the API's database for hold_s. Meanwhile, each second: the reads must
    answer 200, a config write must either be stored (it fit in space SQLite already had) or be
    refused with 507/503 in the API's error shape, never a 500 nor a hung request, and the API
    process must stay the same (no crash, no restart). After the space is freed: a write succeeds
    (WRITE_BACK_TARGET_S, reported), the collector stores again, `PRAGMA integrity_check` is ok, no refused
    write left a version behind, every listed version reads back whole, and the active version is
    what the gateway runs."""
    pid = api.pid()
    s0, listed0 = _get(c, "/api/v1/versions?limit=1")
    last_id = listed0["latest_version_id"] if s0 == 200 else 0
    _, desired = _get(c, "/api/v1/config")
    cfg = dict(desired.get("config") or {})
    reads: dict[str, int] = {}
    writes: dict[str, int] = {}
    refused_comments: list[str] = []
    stored_while_full: list[int] = []
    collector_errors: list[str] = []
    slowest = 0.0

    def write(n: int) -> int:
        nonlocal slowest
        comment = f"soak disk-full write {time.time_ns()}-{n}"
        body = {"config": cfg, "comment": comment}
        t = time.monotonic()
        try:
            r = c.put("/api/v1/config", json=body, timeout=30.0)
            status = r.status_code
            code = str(((r.json() or {}).get("error") or {}).get("code", "")) if status != 200 else ""
            if status == 200:
                return int(r.json()["version_id"])
            refused_comments.append(comment)
            key = f"{status} {code}"
        except httpx.TimeoutException:
            key = "hung"
        except (httpx.HTTPError, ValueError) as e:
            key = type(e).__name__
        finally:
            slowest = max(slowest, time.monotonic() - t)
        writes[key] = writes.get(key, 0) + 1
        return -1

    t = time.monotonic()
    filled = fill(str(api.data_dir))
    st = os.statvfs(str(api.data_dir))
    n = 0
    while time.monotonic() - t < hold_s:
        tick = time.monotonic()
        for path in ("/api/v1/health", "/api/v1/versions", "/api/v1/flows"):
            status, body = _get(c, path)
            reads[str(status)] = reads.get(str(status), 0) + 1
            if path == "/api/v1/health" and status == 200:
                err = ((body.get("api") or {}).get("collector") or {}).get("last_error")
                if err and err not in collector_errors:
                    collector_errors.append(err)
        n += 1
        vid = write(n)
        if vid > 0:
            writes["200 stored"] = writes.get("200 stored", 0) + 1
            stored_while_full.append(vid)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    pid_full = api.pid()
    os.unlink(os.path.join(api.data_dir, FILLER))
    t_free = time.monotonic()
    write_back: float | None = None
    while time.monotonic() - t_free < HUNG_S:
        n += 1
        if write(n) > 0:
            write_back = time.monotonic() - t_free
            break
        time.sleep(0.2)
    collector_back: float | None = None
    while time.monotonic() - t_free < HUNG_S:
        status, body = _get(c, "/api/v1/health")
        if status == 200 and not ((body.get("api") or {}).get("collector") or {}).get("last_error"):
            collector_back = time.monotonic() - t_free
            break
        time.sleep(0.5)
    _, sync_s = wait_in_sync(api, c, RECONCILE_WITHIN_S)
    # Every version written since the fault began reads back whole; no refused write left one.
    half_written: list[Any] = []
    s1, page = _get(c, "/api/v1/versions?limit=500")
    comments = {v["comment"] for v in page.get("versions", [])} if s1 == 200 else set()
    half_written += [cm for cm in refused_comments if cm in comments]
    for v in page.get("versions", []) if s1 == 200 else []:
        if v["id"] > last_id:
            status, full = _get(c, f"/api/v1/versions/{v['id']}")
            if status != 200 or not full.get("config"):
                half_written.append(v["id"])
    return FaultEvent(
        "api-disk-full@hub",
        "api-disk-full",
        t,
        detail={
            "filler_bytes": filled,
            "free_bytes_while_full": st.f_bavail * st.f_frsize,
            "reads": reads,
            "writes": writes,
            "slowest_write_s": round(slowest, 2),
            "stored_while_full": len(stored_while_full),
            "collector_errors": collector_errors[:3],
            "api_restarted": not (pid == pid_full == api.pid()),
            "write_back_s": round(write_back, 2) if write_back is not None else None,
            "collector_back_s": round(collector_back, 2) if collector_back is not None else None,
            "integrity": integrity(str(api.database)),
            "half_written": half_written,
            "in_sync_after_s": round(sync_s, 2) if sync_s is not None else None,
            "idle_timeout_s": idle_timeout_s,
        },
    )


def problems(ev: FaultEvent) -> list[str]:
    """What the control-plane fault left wrong (the data plane is judged by the probes, apart)."""
    d = ev.detail
    if "harness_error" in d:
        return []  # the fault was never carried out: summarize reports the harness error itself
    out: list[str] = []
    if ev.kind == "kill-api":
        if d.get("api_back_s") is None:
            out.append(f"{ev.name}: no authenticated read answered within {API_BACK_WITHIN_S:g} s")
        # A restart before RestartSec is the supervisor's fault; a late one, and the start's time and
        # CPU, are the machine's: reported beside their targets.
        if d.get("restart_delay_s") is not None and d["restart_delay_s"] < RESTART_SEC - 0.1:
            out.append(f"{ev.name}: restarted after {d['restart_delay_s']} s, before RestartSec {RESTART_SEC:g} s")
        if d.get("versions_missing"):
            out.append(f"{ev.name}: versions confirmed before the kill missing: {d['versions_missing']}")
    if ev.kind == "api-disk-full":
        bad_reads = {k: v for k, v in d["reads"].items() if k != "200"}
        if bad_reads:
            out.append(f"{ev.name}: reads while full answered {bad_reads}")
        bad_writes = {k: v for k, v in d["writes"].items() if not k.startswith(("200 ", "507 storage_full", "503 "))}
        if bad_writes:
            out.append(f"{ev.name}: writes while full answered {bad_writes}")
        if d["api_restarted"]:
            out.append(f"{ev.name}: the API process died or restarted while the disk was full")
        if d["write_back_s"] is None:
            out.append(f"{ev.name}: no write succeeded within {HUNG_S:g} s of the space coming back")
        if d["collector_back_s"] is None:
            out.append(f"{ev.name}: the collector did not store again within {HUNG_S:g} s of the space coming back")
        if d["integrity"] != "ok":
            out.append(f"{ev.name}: integrity_check: {d['integrity']}")
        if d["half_written"]:
            out.append(f"{ev.name}: half-written or refused versions present: {d['half_written']}")
    if ev.kind in KINDS and d.get("in_sync_after_s") is None:
        out.append(f"{ev.name}: the active version is not what the gateway runs (drift)")
    return out
