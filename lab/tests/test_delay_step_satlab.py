"""A LEO path change under a running download (prefix sd-, root): the path's delay steps up while Perigee at
both ends carries a bulk flow with its defaults, and the link must stay busy (docs/hybla.md, *A delay step*).

hybla_ld took the smallest RTT it ever saw as the path's: after a step up every round read as a standing
queue, each cut sized the window to the old, shorter pipe and the next cut was taken from the rate that
smaller window carried, so the flow collapsed to a fraction of the link for the rest of the connection. The
link here is `leo` at 20 Mbit/s (little CPU), RTT 30 ms stepping to 44 ms; the busy share is the emulator's own
(its transmitter's busy time over the same span of its clock), so a slow test process does not count. Not a
performance bound: a collapsed flow keeps the link well under half busy, a working one near full.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from conftest import in_ns, satlab

from satlab import linkctl
from satlab.topology import SAT_LINK, Topology

PREFIX = os.environ.get("DELAY_STEP_TEST_PREFIX", "sd-")
SERVER = "10.71.3.10"
RATE = "20M"
STEP_ONE_WAY_MS = 22.0  # 15 -> 22 ms each way: RTT 30 -> 44 ms
MIN_BUSY = 0.5

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")


@pytest.fixture(scope="module")
def leo_lab() -> Iterator[str]:
    satlab("down", prefix=PREFIX, check=False, timeout=60)
    satlab("up", "--profile", "leo", "--fwd-rate", RATE, "--ret-rate", RATE, "--gateway", "both", prefix=PREFIX,
           timeout=180)
    try:
        yield PREFIX
    finally:
        satlab("down", prefix=PREFIX, check=False, timeout=60)


def busy_s(sock: str) -> float:
    return float(linkctl.stats(sock)[SAT_LINK.forward]["busy_s"])


def busy_share(sock: str, seconds: float) -> float:
    """The forward transmitter's busy share over the next `seconds`."""
    b0, t0 = busy_s(sock), time.monotonic()
    time.sleep(seconds)
    b1, t1 = busy_s(sock), time.monotonic()
    return (b1 - b0) / (t1 - t0)


def test_a_delay_step_keeps_the_link_busy(leo_lab: str) -> None:
    sock = Topology(prefix=leo_lab).path(f"{SAT_LINK.name}-link.sock")
    code = f"from satlab import bulk; bulk.client('get', 10**9, '{SERVER}', timeout=60)"
    download = subprocess.Popen(in_ns("client", [sys.executable, "-c", code], leo_lab),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(4.0)  # slow start is over, the peer connection's minimum RTT is the 30 ms path's
        before = busy_share(sock, 3.0)
        linkctl.set_params(sock, "both", {"delay_ms": STEP_ONE_WAY_MS})
        time.sleep(1.0)  # the step: a few RTTs for the minimum RTT to be learned again
        after = busy_share(sock, 6.0)
        assert download.poll() is None, "the download ended early"
    finally:
        download.kill()
        download.wait(timeout=10)
    print(f"forward link busy {100 * before:.0f}% before the step, {100 * after:.0f}% after it")
    assert before > MIN_BUSY, f"the download never filled the link: {before:.2f}"
    assert after > MIN_BUSY, f"after the delay step the link was busy {100 * after:.0f}% of the time"
