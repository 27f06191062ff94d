"""A gateway's announcer: ties what its BGP tells the routers to whether its splitter serves.

A gateway whose splitter daemon died (or runs without a listening worker, `fail_open` in its health)
still forwards: its nft table stays, nothing listens, SYNs pass unsplit. In a cluster that is the wrong
place for new flows while other gateways split. So the announcer polls the daemon's `/v1/health` every
100 ms on its control socket and, on the first failed poll, shuts the gateway's BGP sessions with both
routers: they drop its paths on the NOTIFICATION and the cluster controller moves the gateway's buckets
to the others; two good polls in a row open the sessions again (BGP is up again within seconds). When no
gateway serves, the controller keeps its last table: the cluster as a whole fails open, as one gateway
does.

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


def health(sock_path: str, timeout: float = 0.5) -> dict[str, Any] | None:
    """The daemon's /v1/health as it sent it, or None when it does not answer 200 (polled ten times a second:
    the JSON, no model)."""
    try:
        return GatewayClient(sock_path, timeout_s=timeout).json.health()
    except GatewayError:
        return None


def serving(h: dict[str, Any] | None) -> bool:
    """Splitting new flows: the daemon answers, has its config installed and a worker listening."""
    return h is not None and h.get("config_revision") is not None and not h.get("fail_open", True)


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
    announced: bool | None = None  # unknown: the rendered config starts shut (not serving)
    good = 0
    changed_at = time.time()
    while True:
        ok = serving(health(conf.control_socket))
        good = good + 1 if ok else 0
        want = good >= RECOVER_POLLS if announced is not True else ok
        if want != announced:
            try:
                set_announced(conf, want)
                announced, changed_at = want, time.time()
                print(json.dumps({"at": changed_at, "serving": want}), flush=True)
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
                print(f"announcer: {e}", file=sys.stderr, flush=True)
        write_status(conf, {"serving": bool(announced), "since": changed_at, "polled_at": time.time()})
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
