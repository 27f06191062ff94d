"""Background processes the lab starts: one pidfile each in the run dir, stopped only by that pid."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence

from .sysrun import in_ns


def spawn(ns: str, argv: Sequence[str], pidfile: str, logfile: str,
          env: dict[str, str] | None = None) -> int:
    """Start argv in namespace ns, detached from our session; `ip netns exec` execs in place,
    so the child's pid is the program's pid."""
    with open(logfile, "ab") as log:
        proc = subprocess.Popen(in_ns(ns, argv), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True, env=env)
    with open(pidfile, "w") as f:
        f.write(f"{proc.pid}\n")
    return proc.pid


def read_pid(pidfile: str) -> int | None:
    try:
        with open(pidfile) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except OSError:
        return False


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def stop_pid(pid: int, grace: float = 3.0) -> None:
    """SIGTERM, then SIGKILL after grace seconds; reaps it if it is our child."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        _reap(pid)
        if not alive(pid):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    for _ in range(40):
        _reap(pid)
        if not alive(pid):
            return
        time.sleep(0.05)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stop_pidfile(pidfile: str, must_contain: str) -> None:
    """Stop the process named in pidfile, only if its command line still looks like ours."""
    pid = read_pid(pidfile)
    if pid is not None and alive(pid) and any(must_contain in a for a in cmdline(pid)):
        stop_pid(pid)
    try:
        os.unlink(pidfile)
    except FileNotFoundError:
        pass
