"""`python -m satlab.gwsupervise --pidfile P [--restart-sec S] -- ARGV...`: run the gateway daemon the
way the packaged systemd unit does (debian/perigee-gateway.service: Restart=always, RestartSec=2).

The daemon is restarted S seconds after it exits, whatever its exit status; only our own SIGTERM
(satlab's stop, like `systemctl stop`) ends it for good: we pass SIGTERM on, wait for the daemon's
clean stop, and exit. The daemon's pid is (re)written to P at each start, so satlab's stop and the
soak find the current one. One line per (re)start goes to stdout (the gateway's log).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from types import FrameType

STOP_GRACE_S = 15.0


def argv(pidfile: str, restart_sec: float, cmd: list[str]) -> list[str]:
    """The command line that runs `cmd` under this supervisor (with this interpreter)."""
    return [sys.executable, "-m", "satlab.gwsupervise", "--pidfile", pidfile, "--restart-sec", f"{restart_sec:g}",
            "--", *cmd]


class Supervisor:
    def __init__(self, argv: list[str], pidfile: str, restart_sec: float) -> None:
        self.argv = argv
        self.pidfile = pidfile
        self.restart_sec = restart_sec
        self.stopping = False
        self.child: subprocess.Popen[bytes] | None = None

    def on_term(self, _sig: int, _frame: FrameType | None) -> None:
        self.stopping = True
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signal.SIGTERM)

    def start_child(self) -> subprocess.Popen[bytes]:
        child = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL)
        tmp = self.pidfile + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{child.pid}\n")
        os.replace(tmp, self.pidfile)
        return child

    def run(self) -> int:
        starts = 0
        while not self.stopping:
            self.child = self.start_child()
            starts += 1
            print(f"gwsupervise: started pid {self.child.pid} (start {starts})", flush=True)
            status = self.child.wait()
            if self.stopping:
                break
            print(f"gwsupervise: pid {self.child.pid} exited with {status}; restarting in "
                  f"{self.restart_sec:g} s (Restart=always)", flush=True)
            deadline = time.monotonic() + self.restart_sec
            while not self.stopping and time.monotonic() < deadline:
                time.sleep(0.05)
        if self.child is not None and self.child.poll() is None:
            try:
                self.child.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.child.kill()
                self.child.wait()
        return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="satlab.gwsupervise")
    ap.add_argument("--pidfile", required=True)
    ap.add_argument("--restart-sec", type=float, default=2.0)
    ap.add_argument("argv", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    cmd = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    if not cmd:
        ap.error("give the daemon's argv after --")
    sup = Supervisor(cmd, a.pidfile, a.restart_sec)
    signal.signal(signal.SIGTERM, sup.on_term)
    signal.signal(signal.SIGINT, sup.on_term)
    return sup.run()


if __name__ == "__main__":
    sys.exit(main())
