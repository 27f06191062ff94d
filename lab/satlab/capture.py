"""A capture of the satellite link (tcpdump on the emulator's terminal-side veth, in the lab's `sat`
namespace) while something crosses it, and what it shows: the peer path's checks that nothing of a
flow crosses in clear and which flows opened their own connection across it
(lab/tests/test_peer_satlab.py, bench/scenarios/peer_path.py)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal, TypeVar

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
    return socket.inet_aton(ip) in data


def syn_sources(data: bytes, dst_ip: str, dst_port: int) -> set[tuple[bytes, int]]:
    """The (source address, port) of each connection opened to `dst_ip:dst_port` in a pcap of
    Ethernet frames (IPv4): a SYN without ACK, its retransmissions counted once."""
    dst = socket.inet_aton(dst_ip)
    order: Literal["little", "big"] = "little" if data[:4] == b"\xd4\xc3\xb2\xa1" else "big"
    found: set[tuple[bytes, int]] = set()
    at = 24  # the global header
    while at + 16 <= len(data):
        length = int.from_bytes(data[at + 8:at + 12], order)
        frame = data[at + 16:at + 16 + length]
        at += 16 + length
        if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[23] != 6 or frame[30:34] != dst:
            continue
        tcp = frame[14 + 4 * (frame[14] & 0x0F):]
        if len(tcp) >= 14 and int.from_bytes(tcp[2:4], "big") == dst_port and tcp[13] & 0x12 == 0x02:
            found.add((frame[26:30], int.from_bytes(tcp[0:2], "big")))
    return found
