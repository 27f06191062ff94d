"""The appliance's defaults on a lossy GEO link (prefix sb-, root): `satlab up --profile geo-hts --ber 1e-6
--gateway both`, nothing configured by hand, and a 50 MB download must not collapse (docs/hybla.md, *The
default*). With hybla as the default the same download took about ten times the link's physical limit: Hybla
halves its window on every bit error (1.2% of frames at this BER) and never regains the pipe. The default's
target, 1.3x the limit, is the geo-ber benchmark's row (make bench): how close a download comes to it is the
machine's too, so here the bound tells a collapse (about 10x) from a working default (GIVE_UP_S, 4x), and the
figure is printed.

The time is taken on the link's own clock, not the test's: from the client's connect() to the emulator's
delivery of the last forward frame (CLOCK_MONOTONIC, which every namespace and the emulator share), so
neither the test's start-up nor the client's last reads count. The limit is the benchmarks' (docs/benchmarks.md):
2 RTT + size x 8 / rate. The emulator's busy time is reported beside it: on a loaded machine a slow sender
would show as an idle link, a slow congestion control as an idle link with the window closed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import in_ns, satlab

from satlab import linkctl
from satlab.testing import HUNG_S
from satlab.topology import SAT_LINK, Topology

PREFIX = os.environ.get("LOSSY_TEST_PREFIX", "sb-")
SERVER = "10.71.3.10"
SIZE = 50_000_000
RATE_BPS = 50_000_000  # geo-hts forward
RTT_S = 0.6
LIMIT_S = 2 * RTT_S + SIZE * 8 / RATE_BPS  # 9.2 s
TARGET_X = 1.3
# Not a performance bound: it tells the collapse (about 10x the limit) from a working default (1.3x, the
# benchmark's target), with room for a busy machine.
GIVE_UP_S = 4 * LIMIT_S
REPORTED_WITHIN_S = HUNG_S  # a closed flow reaches the master with its worker's next report (1 s)

pytestmark = pytest.mark.needs_root("network namespaces")

# One GET of the bulk server, timed from just before connect() on CLOCK_MONOTONIC.
CLIENT = (
    "import json, time\n"
    "from satlab import bulk\n"
    "t0 = time.monotonic()\n"
    "r = bulk.client('get', {size}, '{server}', timeout=60)\n"
    "r['t0_mono'] = t0\n"
    "print(json.dumps(r))\n"
)


def sat_socket(prefix: str) -> str:
    return Topology(prefix=prefix).path(f"{SAT_LINK.name}-link.sock")


def forward_stats(prefix: str) -> dict[str, Any]:
    stats: dict[str, Any] = linkctl.stats(sat_socket(prefix))[SAT_LINK.forward]
    return stats


def timed_download(prefix: str) -> dict[str, Any]:
    """One 50 MB download through the lab; its time on the link's clock against the limit."""
    linkctl.reset_counters(sat_socket(prefix))
    code = CLIENT.format(size=SIZE, server=SERVER)
    try:
        p = subprocess.run(in_ns("client", [sys.executable, "-c", code], prefix), capture_output=True, text=True,
                           timeout=GIVE_UP_S)
    except subprocess.TimeoutExpired:
        fwd = forward_stats(prefix)
        return {"done": False, "why": f"not delivered within {GIVE_UP_S:.0f} s ({GIVE_UP_S / LIMIT_S:.0f}x the "
                f"limit): {fwd['bytes_out'] / 1e6:.1f} MB crossed the link, {fwd['drops']} dropped"}
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["complete"] and got["bytes"] == SIZE, got
    time.sleep(0.2)  # the last frames' delivery is on the emulator's books
    fwd = forward_stats(prefix)
    elapsed = fwd["last_out_ns"] / 1e9 - got["t0_mono"]
    return {"done": True, "elapsed_s": elapsed, "x": elapsed / LIMIT_S,
            "busy_fraction": fwd["busy_s"] / elapsed, "client_s": got["duration_s"],
            "lost_frames": fwd["drops"]["ber"], "frames": fwd["frames_in"]}


@pytest.fixture(scope="module")
def lossy_lab() -> Iterator[str]:
    satlab("down", prefix=PREFIX, check=False, timeout=60)
    satlab("up", "--profile", "geo-hts", "--ber", "1e-6", "--gateway", "both", prefix=PREFIX, timeout=180)
    try:
        yield PREFIX
    finally:
        satlab("down", prefix=PREFIX, check=False, timeout=60)


def test_the_default_rides_out_bit_errors_at_ber_1e_6(lossy_lab: str) -> None:
    r = timed_download(lossy_lab)
    assert r["done"], r["why"]
    print(f"50 MB at BER 1e-6, defaults: {r['elapsed_s']:.2f} s on the link's clock = {r['x']:.3f}x the "
          f"{LIMIT_S:.1f} s limit (client {r['client_s']:.2f} s), link busy {100 * r['busy_fraction']:.0f}%, "
          f"{r['lost_frames']} of {r['frames']} frames lost to bit errors")
    # The BER really was on: about 1.2% of full-size frames.
    assert 0.006 < r["lost_frames"] / r["frames"] < 0.02, r
    # Done within GIVE_UP_S (above): no collapse. Against the target (the benchmark's bound): reported.
    print(f"{'within' if r['x'] <= TARGET_X else 'over'} the {TARGET_X}x target (geo-ber, make bench)")


def test_the_hub_reports_what_its_satellite_leg_ran_why_and_what_it_repaired(lossy_lab: str) -> None:
    """After the download above: the hub's closed flow names hybla_ld as the config's default and
    its retransmissions near the BER's frame loss (1.2%); the counters agree."""
    from perigee_control.client import GatewayClient
    from satlab import gateway

    hub = GatewayClient(gateway.socket_path(Topology(prefix=lossy_lab), "hub"))
    # A flow leaves the live list when it closes and reaches the closed list with its worker's next
    # report (every second): wait for it there, at most REPORTED_WITHIN_S.
    deadline = time.monotonic() + REPORTED_WITHIN_S
    while True:
        flows = [f for f in hub.flows("closed").flows if f.server == f"{SERVER}:5001" and f.satellite is not None]
        if flows or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert flows, f"the download's flow is not among the hub's closed flows after {REPORTED_WITHIN_S:g} s"
    leg = max(flows, key=lambda f: f.bytes_down).satellite
    assert leg is not None
    assert (leg.cc, leg.cc_reason) == ("hybla_ld", "default"), leg
    assert leg.segments_sent >= SIZE // 1448, leg
    assert 0.5 < leg.retransmit_pct < 4.0, leg
    by_cc = hub.counters().by_congestion_control
    assert by_cc["hybla_ld"].retrans_segments >= leg.segments_retransmitted > 0, by_cc
    assert by_cc["hybla_ld"].segments >= leg.segments_sent, by_cc
