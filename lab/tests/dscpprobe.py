"""DSCP on both ends of a connection, for the stats lab test (run inside a namespace).

  serve PORT COUNT   listen with TCP_SAVE_SYN, accept COUNT connections, and print one JSON line per
                     connection: the DSCP of the SYN that made it (what the server side saw on the wire)
                     and the client address it came from
  connect HOST PORT DSCP
                     connect with IP_TOS (or IPV6_TCLASS) set to DSCP << 2, send a line, read the answer
"""

from __future__ import annotations

import json
import socket
import sys

TCP_SAVE_SYN = 27
TCP_SAVED_SYN = 28


def dscp_of_ip_header(h: bytes) -> int | None:
    if not h:
        return None
    version = h[0] >> 4
    if version == 4 and len(h) > 1:
        return h[1] >> 2
    if version == 6 and len(h) > 1:
        return (((h[0] & 0x0F) << 4) | (h[1] >> 4)) >> 2
    return None


def serve(port: int, count: int) -> None:
    family = socket.AF_INET6
    srv = socket.socket(family, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    srv.setsockopt(socket.IPPROTO_TCP, TCP_SAVE_SYN, 1)
    srv.bind(("::", port))
    srv.listen(16)
    print(json.dumps({"ready": True}), flush=True)
    for _ in range(count):
        conn, peer = srv.accept()
        with conn:
            syn = conn.getsockopt(socket.IPPROTO_TCP, TCP_SAVED_SYN, 512)
            conn.settimeout(30)
            conn.recv(100)
            conn.sendall(b"ok\n")
            print(json.dumps({"client": peer[0], "dscp": dscp_of_ip_header(syn)}), flush=True)


def connect(host: str, port: int, dscp: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    if family == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, dscp << 2)
    else:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, dscp << 2)
    s.settimeout(30)
    s.connect((host, port))
    s.sendall(b"hello\n")
    print(s.recv(10).decode().strip())
    s.close()


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]), int(sys.argv[3]))
    else:
        connect(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
