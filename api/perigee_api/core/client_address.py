"""The real client address of a request: what the audit log records and the login throttle keys on.

nginx sets `X-Real-IP: $remote_addr` (the address of the TCP connection it accepted; it replaces whatever the
client sent). That header is believed only from the front proxy: on a Unix socket (the one nginx uses; its file
permissions let only nginx's workers connect) or from a TCP peer listed in `forwarded_allow_ips`. Anything else
is answered with its own peer address. `X-Forwarded-For` is never read: a client can put anything in it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from starlette.types import Scope

REAL_IP_HEADER = b"x-real-ip"
SCOPE_KEY = "perigee_client_address"
LOCAL = "local"  # a process on this host that connected to the Unix socket without going through nginx

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class FrontProxies:
    """Who may name the client: always the Unix socket, on TCP only these networks."""

    networks: tuple[Network, ...]

    @classmethod
    def parse(cls, spec: str) -> FrontProxies:
        """'127.0.0.1, 10.0.0.0/8': addresses or CIDRs; '*' is refused (that would believe every client)."""
        nets: list[Network] = []
        for part in (p.strip() for p in spec.split(",")):
            if not part:
                continue
            if part == "*":
                raise ValueError("forwarded_allow_ips: '*' would let every client name its own address")
            nets.append(ipaddress.ip_network(part, strict=False))
        return cls(tuple(nets))

    def trusts(self, peer: str) -> bool:
        try:
            ip = ipaddress.ip_address(peer)
        except ValueError:
            return False
        return any(ip in net for net in self.networks)


def _on_unix_socket(scope: Scope) -> bool:
    # uvicorn on a Unix socket: no peer address, and the server is (path, None).
    server = scope.get("server")
    return scope.get("client") is None and isinstance(server, tuple | list) and server[1] is None


def _header(scope: Scope, name: bytes) -> str | None:
    values = [v for k, v in scope.get("headers", []) if k.lower() == name]
    # Exactly one: a second X-Real-IP could only come from the client (nginx replaces, never appends).
    return values[0].decode("latin-1").strip() if len(values) == 1 else None


def _canonical_ip(text: str | None) -> str | None:
    if not text:
        return None
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def resolve(scope: Scope, proxies: FrontProxies) -> str:
    """The client's address for this request (computed once, then kept in the scope)."""
    known = scope.get(SCOPE_KEY)
    if isinstance(known, str):
        return known
    client = scope.get("client")
    peer = str(client[0]) if client else None
    if _on_unix_socket(scope) or (peer is not None and proxies.trusts(peer)):
        address = _canonical_ip(_header(scope, REAL_IP_HEADER)) or peer or LOCAL
    else:
        address = peer or LOCAL
    scope[SCOPE_KEY] = address
    return address


def client_address(scope: Scope) -> str:
    """The address GuardMiddleware resolved for this request (its first `resolve`, kept in the scope)."""
    return resolve(scope, FrontProxies(()))
