"""A path change under a running download (prefix sd-, root): the path's delay steps up while Perigee at both
ends carries a bulk flow with its defaults, and the link must stay busy (docs/hybla.md, *A delay step*): a GEO
gateway handover and a LEO path change, both on hybla_ld, the default (on a short path with its rho floor).

hybla_ld took the smallest RTT it ever saw as the path's: after a step up every round read as a standing
queue, each cut sized the window to the old, shorter pipe and the next cut was taken from the rate that
smaller window carried, so the flow collapsed to a fraction of the link for the rest of the connection. The
links run at 20 Mbit/s (little CPU); the busy share is the emulator's own
(its transmitter's busy time over the same span of its clock), so a slow test process does not count. Not a
performance bound: a collapsed flow keeps the link well under half busy for the rest of the connection, a working
one near full; so the test waits (at most HUNG_S) for a window in which the link is over half busy, first before
the step, then after it, instead of taking one window at a fixed time (a busy machine may take longer to get there).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from conftest import in_ns, satlab

from satlab import linkctl
from satlab.testing import HUNG_S
from satlab.topology import SAT_LINK, Topology

pytestmark = pytest.mark.needs_root("network namespaces")

PREFIX = os.environ.get("DELAY_STEP_TEST_PREFIX", "sd-")
SERVER = "10.71.3.10"
MIN_BUSY = 0.5


@dataclass(frozen=True)
class Step:
    profile: str
    rate: str
    step_one_way_ms: float  # both directions' delay after the step
    cc: tuple[str, str]  # what the hub's satellite leg runs, and why
    warmup_s: float  # the download fills the link, its minimum RTT is the first path's
    settle_s: float  # after the step: a few RTTs for the minimum RTT to be learned again
    measure_s: float


STEPS = {
    # A GEO gateway handover, RTT 600 -> 800 ms: hybla_ld, the default there, re-learns its minimum.
    "geo": Step("geo-hts", "20M", 400.0, ("hybla_ld", "default"), 6.0, 4.0, 8.0),
    # A LEO path change, RTT 30 -> 44 ms: hybla_ld stays on a short path (satleg_auto), with its rho floor.
    "leo": Step("leo", "20M", 22.0, ("hybla_ld", "default"), 4.0, 1.0, 6.0),
}


@pytest.fixture(params=sorted(STEPS))
def stepped_lab(request: pytest.FixtureRequest) -> Iterator[tuple[str, Step]]:
    step = STEPS[request.param]
    satlab("down", prefix=PREFIX, check=False, timeout=60)
    satlab("up", "--profile", step.profile, "--fwd-rate", step.rate, "--ret-rate", step.rate, "--gateway", "both",
           prefix=PREFIX, timeout=180)
    try:
        yield PREFIX, step
    finally:
        satlab("down", prefix=PREFIX, check=False, timeout=60)


def hub_satellite_leg(prefix: str) -> tuple[str, str]:
    """The download's satellite leg at the hub once it is a live flow there: its congestion control and why it
    runs it."""
    from perigee_control.client import GatewayClient
    from satlab import gateway

    hub = GatewayClient(gateway.socket_path(Topology(prefix=prefix), "hub"))
    deadline = time.monotonic() + HUNG_S
    while True:
        legs = [f.satellite for f in hub.flows("live").flows if f.server == f"{SERVER}:5001" and f.satellite]
        if legs:
            return legs[0].cc, legs[0].cc_reason
        assert time.monotonic() < deadline, "the download is not a live flow at the hub"
        time.sleep(0.5)


def busy_s(sock: str) -> float:
    return float(linkctl.stats(sock)[SAT_LINK.forward]["busy_s"])


def busy_share(sock: str, seconds: float) -> float:
    """The forward transmitter's busy share over the next `seconds`."""
    b0, t0 = busy_s(sock), time.monotonic()
    time.sleep(seconds)
    b1, t1 = busy_s(sock), time.monotonic()
    return (b1 - b0) / (t1 - t0)


def pct(shares: list[float]) -> list[int]:
    return [round(100 * s) for s in shares]


def busy_windows(sock: str, seconds: float) -> list[float]:
    """The busy shares of consecutive windows of `seconds`, until one is over MIN_BUSY or HUNG_S passed."""
    shares: list[float] = []
    deadline = time.monotonic() + HUNG_S
    while not shares or (shares[-1] <= MIN_BUSY and time.monotonic() < deadline):
        shares.append(busy_share(sock, seconds))
    return shares


def test_a_delay_step_keeps_the_link_busy(stepped_lab: tuple[str, Step]) -> None:
    prefix, step = stepped_lab
    sock = Topology(prefix=prefix).path(f"{SAT_LINK.name}-link.sock")
    code = f"from satlab import bulk; bulk.client('get', 10**9, '{SERVER}', timeout=60)"  # 400 s at 20 Mbit/s
    download = subprocess.Popen(in_ns("client", [sys.executable, "-c", code], prefix),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(step.warmup_s)
        ran = hub_satellite_leg(prefix)
        before = busy_windows(sock, 3.0)
        linkctl.set_params(sock, "both", {"delay_ms": step.step_one_way_ms})
        time.sleep(step.settle_s)
        after = busy_windows(sock, step.measure_s)
        assert download.poll() is None, "the download ended early"
    finally:
        download.kill()
        download.wait(timeout=10)
    print(f"{step.profile}: forward link busy {pct(before)}% before the step, {pct(after)}% after it")
    assert ran == step.cc, ran
    assert before[-1] > MIN_BUSY, f"the download never filled the link: {pct(before)}%"
    assert after[-1] > MIN_BUSY, f"after the delay step the link was never busy again: {pct(after)}%"
