"""A stand-in for the lab's DNS server behind the satellite, for lab tests that turn the cache on.

The gateways name `satlab.gateway.LAB_RESOLVER` as their resolver, and the cache steps aside to the
splitter while no resolver answers (docs/dns.md). A lab that runs its own DNS server there needs
nothing; on one that does not, `standing_in(prefix)` puts the address on the server namespace and
answers every query with REFUSED (as an authoritative server does outside its zones: an answer,
so the resolver counts as reachable), until the block ends. The tests that use it fetch by IP.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from satlab import gateway

# Answers every query on UDP port 53 of ADDR with REFUSED (header: QR, opcode and RD kept, RCODE 5).
RESPONDER = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 53))
print("ready", flush=True)
while True:
    q, peer = s.recvfrom(1500)
    if len(q) >= 12:
        s.sendto(q[:2] + bytes([0x80 | (q[2] & 0x79), 0x05]) + q[4:], peer)
"""


def answers(prefix: str, timeout: float = 1.0) -> bool:
    """Whether something at LAB_RESOLVER answers a DNS query sent from the hub namespace."""
    probe = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(float(sys.argv[2]))\n"
        "s.sendto(b'\\x12\\x34\\x01\\x00\\x00\\x01' + bytes(6) + b'\\x00\\x00\\x02\\x00\\x01', (sys.argv[1], 53))\n"
        "try:\n    sys.exit(0 if s.recv(512)[:2] == b'\\x12\\x34' else 1)\nexcept OSError:\n    sys.exit(1)\n"
    )
    p = subprocess.run(["ip", "netns", "exec", f"{prefix}hub", sys.executable, "-c", probe,
                        gateway.LAB_RESOLVER, str(timeout)], capture_output=True, timeout=timeout + 10)
    return p.returncode == 0


@contextmanager
def standing_in(prefix: str) -> Iterator[bool]:
    """Yields True while the stand-in answers, False when the lab's own server does."""
    if answers(prefix):
        yield False
        return
    server = f"{prefix}server"
    subprocess.run(["ip", "-n", server, "addr", "replace", f"{gateway.LAB_RESOLVER}/24", "dev", "eth0"],
                   check=True, capture_output=True)
    proc = subprocess.Popen(["ip", "netns", "exec", server, sys.executable, "-c", RESPONDER, gateway.LAB_RESOLVER],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready", proc.stderr
        yield True
    finally:
        proc.kill()
        proc.wait(timeout=10)
        subprocess.run(["ip", "-n", server, "addr", "del", f"{gateway.LAB_RESOLVER}/24", "dev", "eth0"],
                       capture_output=True)
