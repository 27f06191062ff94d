"""up/down on their own prefixes: custom RTT, clean teardown, a failed up (emulator or gateway) cleans up."""

from __future__ import annotations

import os
import subprocess

import pytest
from conftest import ping_rtts, satlab
from test_lab import rtt_ok

pytestmark = pytest.mark.needs_root("network namespaces")


def namespaces_with(prefix: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(prefix)]


def test_custom_rtt_then_down_leaves_nothing() -> None:
    prefix = "su-"
    satlab("down", prefix=prefix, check=False)
    try:
        satlab("up", "--rtt", "100", "--fwd-rate", "10M", "--ret-rate", "5M", prefix=prefix)
        rtts = ping_rtts("client", "10.71.3.10", 8, prefix=prefix)[1:]
        assert rtt_ok(rtts, 100), rtts
        assert len(ping_rtts("client", "fd71:3::10", 2, prefix=prefix)) == 2
    finally:
        satlab("down", prefix=prefix)
    assert namespaces_with(prefix) == []
    assert not os.path.exists(f"/run/satlab/{prefix}")
    satlab("down", prefix=prefix)  # idempotent


def test_failed_up_cleans_up() -> None:
    prefix = "sf-"
    p = satlab("up", prefix=prefix, check=False, env={"SATLAB_LINK_BIN": "/nonexistent/satlab-link"})
    assert p.returncode == 1 and "emulator" in p.stderr
    assert namespaces_with(prefix) == []
    assert not os.path.exists(f"/run/satlab/{prefix}")


@pytest.mark.parametrize(("binary", "says"), [
    ("/nonexistent/perigee", "is not an executable file"),  # a wrong path: refused before it runs
    ("/bin/false", "exited (1)"),  # a daemon that dies at once
])
def test_gateway_that_cannot_start_is_a_clear_error(binary: str, says: str) -> None:
    p = satlab("up", "--gateway", "hub", prefix="sg-", check=False, env={"SATLAB_GATEWAY_BIN": binary})
    assert p.returncode == 1 and "gateway on hub did not start" in p.stderr and says in p.stderr, p.stderr
    assert namespaces_with("sg-") == []
    assert not os.path.exists("/run/satlab/sg-")
