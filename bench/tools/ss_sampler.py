"""Poll `ss -tinH` every 100 ms in the current namespace and keep the sockets matching a port.

For a sender we do not own (the gateway's satellite-leg socket). Prints a JSON list of samples."""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time

from bench.tools.ss_parse import parse_ss, port_of

# States in which a socket may still send data: a gateway whose upstream finished early shuts its
# satellite-leg socket down (FIN-WAIT-1) while most of the data is still queued in it.
SENDING_STATES = ("ESTAB", "FIN-WAIT-1", "CLOSE-WAIT")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.tools.ss_sampler")
    parser.add_argument("--peer-port", type=int, help="keep sockets whose peer port is this")
    parser.add_argument(
        "--local-port",
        type=int,
        action="append",
        help="keep sockets whose local port is this (repeatable: any of them)",
    )
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--period", type=float, default=0.1)
    args = parser.parse_args(argv)
    samples = []
    end = time.monotonic() + args.duration
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))  # stop early but still print the samples
    next_t = time.monotonic()
    while next_t < end and not stop:
        t = time.monotonic()
        out = subprocess.run(
            ["ss", "-tinH"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout
        for sock in parse_ss(out):
            if sock["state"] not in SENDING_STATES:
                continue
            if args.peer_port and port_of(sock["peer"]) != args.peer_port:
                continue
            if args.local_port and port_of(sock["local"]) not in args.local_port:
                continue
            samples.append({"t": t, **sock})
        next_t += args.period
        time.sleep(max(0.0, next_t - time.monotonic()))
    json.dump(samples, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
