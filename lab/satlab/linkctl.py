"""Client for the link emulator's control socket (newline-delimited JSON, one reply line per request)."""

from __future__ import annotations

import json
import socket
from typing import Any


class LinkControlError(RuntimeError):
    pass


def request(sock_path: str, msg: dict[str, Any], timeout: float = 5.0) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(sock_path)
        except OSError as e:
            raise LinkControlError(f"cannot reach link emulator at {sock_path}: {e}") from e
        s.sendall(json.dumps(msg).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    if not buf:
        raise LinkControlError(f"link emulator at {sock_path} closed without a reply")
    reply: dict[str, Any] = json.loads(buf.decode())
    if not reply.get("ok", False):
        raise LinkControlError(f"link emulator refused {msg.get('cmd')}: {reply.get('error', reply)}")
    return reply


def get(sock_path: str) -> dict[str, Any]:
    return request(sock_path, {"cmd": "get"})


def set_params(sock_path: str, direction: str, params: dict[str, Any]) -> dict[str, Any]:
    return request(sock_path, {"cmd": "set", "dir": direction, "params": params})


def schedule(sock_path: str, request_msg: dict[str, Any]) -> dict[str, Any]:
    """Start (or, with no steps, stop) a link schedule: the emulator's `schedule` request."""
    return request(sock_path, request_msg)


def stats(sock_path: str) -> dict[str, Any]:
    return request(sock_path, {"cmd": "stats"})


def reset_counters(sock_path: str) -> dict[str, Any]:
    return request(sock_path, {"cmd": "reset_counters"})


def shutdown(sock_path: str) -> None:
    try:
        request(sock_path, {"cmd": "shutdown"}, timeout=2.0)
    except (LinkControlError, OSError, ValueError):
        pass
