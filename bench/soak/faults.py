"""The soak's faults. Each one acts at once and returns a FaultEvent: when it struck (monotonic
seconds, the clock the load's records use), when its condition ended (for conditions that last:
a full disk, a dead link, lost routes) and what the gateway said."""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from bench import lab as benchlab
from bench import procs
from bench.soak import gwprocs
from perigee_control.client import GatewayClient, GatewayError

# How long each daemon fault should take until new flows are served again: the 1 s target for all
# of them, reported beside each fault's recovery (a target of the design, measured on this machine:
# never a pass/fail bound, which would be the machine's). A dead worker's share of new flows goes to
# the others at once; a failed apply leaves the previous state serving; a dead Squid's port 80 goes
# to the splitter within the master's liveness check (250 ms); a dead master takes its workers with
# it but leaves the nft rules, so new flows are routed unsplit (fail-open) until its service manager
# has restarted it (reported apart: FaultEvent.detail["healthy_after_s"]). The control plane's
# faults (the API killed, its disk full) must not touch the data plane at all: the same target,
# measured from the fault's start; what they must leave behind is in bench/soak/apifaults.py.
TARGETS_S = {
    "kill-worker": 1.0,
    "apply-fail": 1.0,
    "kill-squid": 1.0,
    "kill-master": 1.0,
    "kill-api": 1.0,
    "api-disk-full": 1.0,
}
# What the soak calls hung rather than slow: new flows not served again within this of a fault (or
# of the end of its condition), a killed daemon not healthy again within it. Generous on purpose:
# on a loaded machine recovery is slow, not wrong (satlab.testing.HUNG_S, the tests' same bound).
HUNG_S = 60.0


@dataclass
class FaultEvent:
    name: str  # e.g. "kill-worker@terminal", "apply-fail:routes@terminal"
    kind: str  # a key of TARGETS_S, or "squid-disk-full", "link-down", "routes-lost"
    t: float
    t_restored: float | None = None  # the condition ended (None: it ends at once)
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def t_ref(self) -> float:
        """Recovery is measured from here: the fault, or the end of a lasting condition."""
        return self.t_restored if self.t_restored is not None else self.t


class Gateways:
    """The two gateways of a `--gateway both` lab, reached through satlab's run dir."""

    def __init__(self, lb: benchlab.Lab) -> None:
        self.lb = lb
        self.run_dir = f"/run/satlab/{lb.prefix}"

    def pidfile(self, role: str) -> str:
        return f"{self.run_dir}/gw-{self.lb.ns(role)}.pid"

    def sock(self, role: str) -> str:
        return f"{self.run_dir}/gw-{self.lb.ns(role)}.sock"

    def master(self, role: str) -> int | None:
        return gwprocs.read_pid(self.pidfile(role))

    def request(self, role: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        answer = GatewayClient(self.sock(role), timeout_s=60.0).exchange(method, path, body)
        return answer.status, answer.body

    def config(self, role: str) -> dict[str, Any]:
        status, cfg = self.request(role, "GET", "/v1/config")
        if status != 200:
            raise RuntimeError(f"GET /v1/config on {role}: {status} {cfg}")
        return dict(cfg.get("config", cfg))

    def put_config(self, role: str, cfg: dict[str, Any]) -> tuple[int, Any]:
        return self.request(role, "PUT", "/v1/config", cfg)

    def live_flows(self, role: str) -> int:
        status, health = self.request(role, "GET", "/v1/health")
        if status != 200:
            raise RuntimeError(f"health of {role}: {status}")
        return sum(int(w.get("live", 0)) for w in health.get("workers", []))

    def wait_healthy(self, role: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                status, health = self.request(role, "GET", "/v1/health")
                if status == 200 and all(w.get("alive") for w in health.get("workers", [])):
                    return True
            except GatewayError:
                pass
            time.sleep(0.2)
        return False


def _sigkill(pid: int | None, what: str) -> int:
    if pid is None:
        raise RuntimeError(f"no {what} process to kill")
    os.kill(pid, signal.SIGKILL)
    return pid


def kill_worker(gw: Gateways, role: str) -> FaultEvent:
    master = gw.master(role)
    pids = gwprocs.workers(master) if master else []
    t = time.monotonic()
    pid = _sigkill(pids[0] if pids else None, f"{role} worker")
    return FaultEvent(f"kill-worker@{role}", "kill-worker", t, detail={"pid": pid})


def kill_master(gw: Gateways, role: str) -> FaultEvent:
    t = time.monotonic()
    pid = _sigkill(gw.master(role), f"{role} master")
    return FaultEvent(f"kill-master@{role}", "kill-master", t, detail={"pid": pid})


def kill_squid(gw: Gateways, role: str) -> FaultEvent:
    master = gw.master(role)
    t = time.monotonic()
    pid = _sigkill(gwprocs.squid_master(master) if master else None, f"{role} squid")
    return FaultEvent(f"kill-squid@{role}", "kill-squid", t, detail={"pid": pid})


def net_state(lb: benchlab.Lab, role: str) -> list[str]:
    """What an apply installs in the namespace: the nft ruleset (without counters), routes,
    policy rules and the satellite interface's qdiscs."""
    out = []
    for argv in (
        ["nft", "-s", "list", "ruleset"],
        ["ip", "-4", "route", "show", "table", "all"],
        ["ip", "-6", "route", "show", "table", "all"],
        ["ip", "rule"],
        ["ip", "-6", "rule"],
        ["tc", "qdisc", "show", "dev", "sat0"],
    ):
        out.append(procs.run(lb.exec_argv(role, argv), timeout=10, check=False).stdout)
    return out


def state_diff(before: list[str], after: list[str], max_lines: int = 24) -> list[str]:
    """The lines that differ (-before, +after), for the log: what a rollback did not put back."""
    out: list[str] = []
    for b, a in zip(before, after, strict=True):
        if b != a:
            out += [
                line
                for line in difflib.unified_diff(b.splitlines(), a.splitlines(), lineterm="", n=0)
                if line[:1] in "+-" and not line.startswith(("+++", "---"))
            ]
    return out[:max_lines]


def apply_fail(gw: Gateways, role: str, step: str, fault_file: str) -> FaultEvent:
    """A config apply that fails after `step` (the daemon's test-only hook): the daemon must
    answer 409 naming the step, keep serving, and leave the namespace exactly as it was."""
    cfg = gw.config(role)
    before = net_state(gw.lb, role)
    cfg["revision"] = f"soak-apply-fail-{step}-{time.time_ns()}"
    with open(fault_file, "w") as f:
        f.write(step)
    t = time.monotonic()
    try:
        status, reply = gw.put_config(role, cfg)
    finally:
        os.unlink(fault_file)
    got_step = ((reply or {}).get("error") or {}).get("step")
    _, health = gw.request(role, "GET", "/v1/health")
    after = net_state(gw.lb, role)
    changed = [i for i, (b, a) in enumerate(zip(before, after, strict=True)) if b != a]
    detail = {
        "status": status,
        "step_reported": got_step,
        "revision_after": (health or {}).get("config_revision"),
        "state_changed": changed,
        "state_diff": state_diff(before, after),
        "rolled_back": status == 409
        and got_step == step
        and not changed
        and (health or {}).get("config_revision") != cfg["revision"],
    }
    return FaultEvent(f"apply-fail:{step}@{role}", "apply-fail", t, detail=detail)


FILLER = "soak-filler"


def fill(path: str) -> int:
    """Write FILLER under `path` until the filesystem refuses (ENOSPC): 0 bytes left. Returns the bytes
    written."""
    written = 0
    chunk = b"\0" * (1 << 20)
    fd = os.open(os.path.join(path, FILLER), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while True:
            try:
                n = os.write(fd, chunk)  # unbuffered: a partial write takes the last bytes
            except OSError:
                break
            if n == 0:
                break
            written += n
    finally:
        os.close(fd)
    return written


@contextlib.contextmanager
def tmpfs(path: str, size_mb: int, mode: str, source: str) -> Iterator[str]:
    """A private tmpfs mounted on `path` (a stale one unmounted first), so filling it harms nothing
    else; lazily unmounted when the block ends."""
    subprocess.run(["umount", path], capture_output=True, check=False)
    os.makedirs(path, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode={mode}", source, path],
        check=True,
    )
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", path], capture_output=True, check=False)


def squid_disk_full(store_mount: str, hold_s: float) -> FaultEvent:
    """Fill the small filesystem under Squid's store until ENOSPC, hold, then free it."""
    t = time.monotonic()
    written = fill(store_mount)
    st = os.statvfs(store_mount)
    time.sleep(hold_s)
    os.unlink(os.path.join(store_mount, FILLER))
    return FaultEvent(
        "squid-disk-full@terminal",
        "squid-disk-full",
        t,
        time.monotonic(),
        {"filler_bytes": written, "free_bytes_while_full": st.f_bavail * st.f_frsize},
    )


def link_down(lb: benchlab.Lab, hold_s: float) -> FaultEvent:
    """Every frame on the satellite link lost, both ways, for hold_s."""
    t = time.monotonic()
    lb.link_set("--per", "1")
    time.sleep(hold_s)
    lb.link_set("--per", "0")
    return FaultEvent("link-down", "link-down", t, time.monotonic(), {"seconds": hold_s})


def _routes_with_gateway(lb: benchlab.Lab, role: str) -> list[list[str]]:
    out = []
    for fam in ("-4", "-6"):
        text = procs.run(lb.exec_argv(role, ["ip", "-j", fam, "route", "show"]), timeout=10).stdout
        for r in json.loads(text or "[]"):
            if r.get("gateway"):
                out.append([fam, "route", "del", r["dst"], "via", r["gateway"]])
    return out


def routes_lost(lb: benchlab.Lab, gw: Gateways, role: str, hold_s: float) -> FaultEvent:
    """Every route with a next hop in the gateway's namespace deleted (default and satellite
    routes); after hold_s the operator re-applies the running config, which puts back the
    gateway's own satellite routes."""
    dels = _routes_with_gateway(lb, role)
    t = time.monotonic()
    for argv in dels:
        procs.run(lb.exec_argv(role, ["ip", *argv]), timeout=10, check=False)
    time.sleep(hold_s)
    cfg = gw.config(role)
    cfg["revision"] = f"soak-reapply-{time.time_ns()}"
    t_reapply = time.monotonic()
    status, _ = gw.put_config(role, cfg)
    left = _routes_with_gateway(lb, role)
    return FaultEvent(
        f"routes-lost@{role}",
        "routes-lost",
        t,
        t_reapply,
        {
            "deleted": len(dels),
            "reapply_status": status,
            "routes_after_reapply": len(left),
            "deleted_routes": dels,
        },
    )


def restore_argv(deleted: list[str]) -> list[str]:
    """`ip` arguments that put a deleted route back only if it is still missing: `add`, never
    `replace`. The re-apply has already put back the gateway's own routes with their attributes
    (initcwnd, congctl hybla); replacing them with bare copies left the namespace differing from
    what the gateway installs, which the next rolled-back apply then "changed" back."""
    return [*deleted[:2], "add", *deleted[3:]]


def restore_routes(lb: benchlab.Lab, role: str, argvs: list[list[str]]) -> None:
    for argv in argvs:
        # An existing route ("File exists") is left as the gateway set it.
        subprocess.run(
            lb.exec_argv(role, ["ip", *restore_argv(argv)]),
            check=False,
            capture_output=True,
        )
