"""A capture of the satellite link (tcpdump on the emulator's terminal-side veth, in the lab's `sat`
namespace) while something crosses it, and what it shows: the peer path's checks that nothing of a
flow crosses in clear (lab/tests/test_peer_satlab.py, bench/scenarios/peer_path.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
SETTLE_S = 1.0  # tcpdump listening before, the last segments in after


def sniff(exec_argv: Callable[[str, list[str]], list[str]], pcap: str, during: Callable[[], T]) -> tuple[bytes, T]:
    """The link's frames (whole, both directions) while `during()` runs, and what it returned."""
    dump = subprocess.Popen(exec_argv("sat", ["tcpdump", "-i", "st0", "-U", "-s", "0", "-w", pcap]),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(SETTLE_S)
        result = during()
        time.sleep(SETTLE_S)
    finally:
        dump.send_signal(signal.SIGINT)
        dump.wait(timeout=10)
    data = Path(pcap).read_bytes()
    os.unlink(pcap)
    return data, result


def ipv4_in(data: bytes, ip: str) -> bool:
    """Whether the IPv4 address appears anywhere in the capture, as the 4 bytes a header holds."""
    return bytes(int(x) for x in ip.split(".")) in data
