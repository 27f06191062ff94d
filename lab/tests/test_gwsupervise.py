"""satlab.gwsupervise: the lab's copy of the packaged unit's Restart=always (no namespaces needed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from satlab.testing import HUNG_S


def _pid(pidfile: Path, not_: int | None = None, timeout: float = HUNG_S) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid = int(pidfile.read_text().split()[0])
            if pid != not_:
                return pid
        except (OSError, ValueError, IndexError):
            pass
        time.sleep(0.02)
    raise AssertionError(f"no new pid in {pidfile} within {timeout} s")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except OSError:
        return False


def test_killed_daemon_comes_back_after_restart_sec_and_sigterm_stops_for_good(tmp_path: Path) -> None:
    pidfile = tmp_path / "daemon.pid"
    sup = subprocess.Popen([sys.executable, "-m", "satlab.gwsupervise", "--pidfile", str(pidfile),
                            "--restart-sec", "0.5", "--", "sleep", "600"],
                           stdout=subprocess.DEVNULL)
    try:
        first = _pid(pidfile)
        t0 = time.monotonic()
        os.kill(first, signal.SIGKILL)
        second = _pid(pidfile, not_=first)
        waited = time.monotonic() - t0
        print(f"restarted {waited:.2f} s after the kill (RestartSec 0.5 s)")
        assert waited >= 0.4, waited  # RestartSec, not at once (and not never: _pid gives up after HUNG_S)
        assert _alive(second)
        sup.send_signal(signal.SIGTERM)
        assert sup.wait(timeout=20) == 0
        assert not _alive(second)
        time.sleep(0.8)
        assert int(pidfile.read_text().split()[0]) == second  # nothing restarted after the stop
    finally:
        if sup.poll() is None:
            sup.kill()
