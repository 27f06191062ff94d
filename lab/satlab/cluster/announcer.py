"""A gateway's announcer: ties what its BGP tells the routers to whether its splitter serves.

A gateway whose splitter daemon died (or runs without a listening worker, `fail_open` in its health)
still forwards: its nft table stays, nothing listens, SYNs pass unsplit. In a cluster that is the wrong
place for new flows while other gateways split. So the announcer polls the daemon's `/v1/health` every
100 ms on its control socket. A daemon that is gone (nothing listens on the socket) or says it does not
serve shuts the gateway's BGP sessions with both routers at the first such poll: they drop its paths on
the NOTIFICATION and the cluster controller moves the gateway's buckets to the others. A daemon that is
only slow to answer (a loaded host) is still splitting its flows, and shutting it would cost every one
of them, so it is shut only once it has left every poll unanswered for UNANSWERED_S (a hung daemon).
Two good polls in a row open the sessions again (BGP is up again within seconds). When no gateway
serves, the controller keeps its last table: the cluster as a whole fails open, as one gateway does.

On a box of its own the same role belongs beside the daemon (e.g. a unit bound to perigee-gateway);
here one runs per gateway namespace: `python -m satlab.cluster.announcer CONFIG.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from perigee_control.client import GatewayClient, GatewayError

POLL_S = 0.1
RECOVER_POLLS = 2
HEALTH_TIMEOUT_S = 0.5
# How long a daemon may leave the polls unanswered (each waits HEALTH_TIMEOUT_S) before it counts as hung:
# longer than a loaded host's stall, short enough that a hung daemon's new flows go elsewhere within 2 s.
UNANSWERED_S = 1.5


@dataclass(frozen=True)
class AnnouncerConf:
    control_socket: str
    vty_socket: str
    status_file: str
    asn: int
    vtysh: str = "vtysh"

    @staticmethod
    def load(path: str) -> AnnouncerConf:
        return AnnouncerConf(**json.loads(open(path).read()))


SLOW = "slow"  # health(): no answer within the timeout (the daemon may be busy, not gone)


def health(sock_path: str, timeout: float = HEALTH_TIMEOUT_S) -> dict[str, Any] | str:
    """The daemon's /v1/health as it sent it (polled ten times a second: the JSON, no model), SLOW when it
    did not answer in time, or why it is not there (nothing listens, the socket is missing, a bad answer)."""
    try:
        return GatewayClient(sock_path, timeout_s=timeout).json.health()
    except GatewayError as e:
        return SLOW if isinstance(e.__cause__, TimeoutError) else e.message


def serving(h: dict[str, Any] | str) -> bool:
    """Splitting new flows: the daemon answered, has its config installed and a worker listening."""
    return isinstance(h, dict) and h.get("config_revision") is not None and not h.get("fail_open", True)


@dataclass
class Verdict:
    """What the polls so far say about the daemon: whether to announce the gateway."""

    announced: bool | None = None  # unknown: the rendered config starts shut (not serving)
    good: int = 0  # good polls in a row
    answered_at: float = float("-inf")  # monotonic time of the last poll the daemon answered

    def want(self, h: dict[str, Any] | str, now: float) -> bool:
        ok = serving(h)
        if h != SLOW:
            self.answered_at = now
        self.good = self.good + 1 if ok else 0
        if self.announced is not True:
            return self.good >= RECOVER_POLLS
        if h == SLOW:
            return now - self.answered_at < UNANSWERED_S
        return ok


def set_announced(conf: AnnouncerConf, serve: bool) -> None:
    argv = [conf.vtysh, "--vty_socket", conf.vty_socket, "-c", "configure terminal",
            "-c", f"router bgp {conf.asn}", "-c", ("no " if serve else "") + "neighbor R4 shutdown", "-c", "end"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    if p.returncode != 0:
        raise RuntimeError(f"vtysh: {(p.stderr or p.stdout).strip()}")


def write_status(conf: AnnouncerConf, state: dict[str, Any]) -> None:
    tmp = conf.status_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, conf.status_file)


def serve_forever(conf: AnnouncerConf) -> None:
    v = Verdict()
    changed_at = time.time()
    while True:
        h = health(conf.control_socket)
        want = v.want(h, time.monotonic())
        if want != v.announced:
            try:
                set_announced(conf, want)
                v.announced, changed_at = want, time.time()
                why = None if want else (h if isinstance(h, str) else "not serving")
                print(json.dumps({"at": changed_at, "serving": want, "why": why}), flush=True)
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
                print(f"announcer: {e}", file=sys.stderr, flush=True)
        elif h == SLOW:
            print(json.dumps({"at": time.time(), "slow": True}), flush=True)
        write_status(conf, {"serving": bool(v.announced), "since": changed_at, "polled_at": time.time()})
        time.sleep(POLL_S)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="satlab.cluster.announcer")
    ap.add_argument("config")
    a = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    serve_forever(AnnouncerConf.load(a.config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
