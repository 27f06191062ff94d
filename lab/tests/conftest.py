"""Shared fixtures: the lab under prefix st- (root only), helpers to drive it through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from satlab.testing import cannot_run

# SATLAB_TEST_PREFIX lets two people run the suite on one host without sharing a lab.
PREFIX = os.environ.get("SATLAB_TEST_PREFIX", "st-")
needs_root = pytest.mark.needs_root("network namespaces")  # satlab.testing: skipped, or failed in CI


class PrefixTopo:
    """satlab's Topology as satlab.gateway sees it, for the lab under `prefix`."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def ns(self, role: str) -> str:
        return f"{self.prefix}{role}"

    def path(self, name: str) -> str:
        return f"/run/satlab/{self.prefix}/{name}"


def eventually(read: Any, check: Any, timeout: float = 6.0) -> Any:
    """Reports reach a gateway's master once a second per worker: poll until `check(read())`, then
    (or at the timeout) return the last value read."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if check(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def satlab(*args: str, prefix: str = PREFIX, check: bool = True, timeout: float = 120,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ, **(env or {}))
    p = subprocess.run([sys.executable, "-m", "satlab", "--prefix", prefix, *args],
                       capture_output=True, text=True, timeout=timeout, env=full_env)
    if check and p.returncode != 0:
        raise AssertionError(f"satlab {' '.join(args)} -> {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def in_ns(role: str, argv: list[str], prefix: str = PREFIX) -> list[str]:
    return ["ip", "netns", "exec", f"{prefix}{role}", *argv]


def client_tool(role: str, *args: str, prefix: str = PREFIX, timeout: float = 120) -> dict[str, Any]:
    """Run `python -m satlab.clients ...` inside a namespace; parse its JSON line."""
    p = subprocess.run(in_ns(role, [sys.executable, "-m", "satlab.clients", *args], prefix),
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr
    out: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    return out


def ping_rtts(role: str, target: str, count: int, interval: float = 0.2, prefix: str = PREFIX) -> list[float]:
    p = subprocess.run(in_ns(role, ["ping", "-n", "-c", str(count), "-i", str(interval), target], prefix),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    return [float(line.split("time=")[1].split()[0]) for line in p.stdout.splitlines() if "time=" in line]


def set_link(direction: str = "both", **params: Any) -> None:
    """Set the satellite link (emulator) directly: exact JSON params, partial allowed."""
    from satlab import linkctl
    from satlab.cli import _emu_dir

    sock = f"/run/satlab/{PREFIX}/sat-link.sock"
    linkctl.set_params(sock, _emu_dir("sat", direction), params)


def link_stats() -> dict[str, Any]:
    from satlab import linkctl
    from satlab.cli import _dir_view

    return _dir_view("sat", linkctl.stats(f"/run/satlab/{PREFIX}/sat-link.sock"))


CLEAN = {"jitter_ms": 0, "per": 0, "ber": 0, "gilbert": None, "bod": None}


@pytest.fixture(scope="session")
def lab() -> Iterator[None]:
    """The st- lab with the geo-acts-t1 profile; torn down whatever happens."""
    if os.geteuid() != 0:
        cannot_run("needs root (network namespaces)")
    satlab("down", check=False)
    satlab("up", "--profile", "geo-acts-t1")
    try:
        yield
    finally:
        satlab("down", check=False)


@pytest.fixture
def fast_link(lab: None) -> Iterator[None]:
    """A short, fast, clean link for tests that move data; restores geo-acts-t1 after."""
    set_link("both", delay_ms=10, rate_bps=50_000_000, buffer_bytes=1_000_000, **CLEAN)
    yield
    set_link("both", delay_ms=290, rate_bps=1_536_000, buffer_bytes=131_072, **CLEAN)
