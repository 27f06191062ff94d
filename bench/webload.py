"""One HTTPS page load by bench/browser/load_modern.js, parsed: the page's load time and the
per-request breakdown (DNS, TCP, TLS, first byte, transfer) from the browser's network timing.

Phases of a request (ms; the driver gives -1 for a phase that did not happen):
- dns = dns_end - dns_start; tcp = (tls_start or connect_end) - connect_start;
  tls = tls_end - tls_start (over QUIC the browser reports the whole handshake as connect, no TLS
  part: it is counted as tcp+tls = "setup", see `setup_ms`); these exist only for the requests that
  opened a connection (the others reuse one: HTTP/2 and HTTP/3 multiplex);
- first byte = headers_end - send_start (the request's round trip plus the server's time);
- transfer = end - headers_end (the body).
"""

from __future__ import annotations

import json
import os
import select
import statistics
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench import procs

PHASES = ("dns_ms", "tcp_ms", "tls_ms", "first_byte_ms", "transfer_ms")


class LoadError(RuntimeError):
    """A load that did not complete, or whose answer does not hold what it must."""


@dataclass(frozen=True)
class Request:
    url: str
    status: int
    protocol: str
    new_connection: bool
    dns_ms: float | None
    tcp_ms: float | None
    tls_ms: float | None
    first_byte_ms: float
    transfer_ms: float
    end_ms: float


@dataclass
class PageLoad:
    load_s: float  # max(load event, last object's last byte), from the HTML's request
    load_event_s: float
    requests: list[Request]
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def connections(self) -> int:
        return sum(1 for r in self.requests if r.new_connection)

    def protocol_share(self, protocol: str) -> float:
        return sum(1 for r in self.requests if r.protocol == protocol) / len(self.requests)

    def mean_phase(self, phase: str, new_only: bool) -> float | None:
        """Mean of a phase over the requests (those that opened a connection when new_only)."""
        values = [getattr(r, phase) for r in self.requests if (r.new_connection or not new_only)]
        values = [v for v in values if v is not None]
        return statistics.fmean(values) if values else None

    def breakdown(self) -> dict[str, float | None]:
        """Per load: DNS/TCP/TLS as means over the connections it opened, first byte and
        transfer as means over all requests."""
        return {
            "dns_ms": self.mean_phase("dns_ms", True),
            "tcp_ms": self.mean_phase("tcp_ms", True),
            "tls_ms": self.mean_phase("tls_ms", True),
            "first_byte_ms": self.mean_phase("first_byte_ms", False),
            "transfer_ms": self.mean_phase("transfer_ms", False),
        }


def _span(start: float, end: float) -> float | None:
    return end - start if start >= 0 and end >= start else None


def parse_request(r: dict[str, Any]) -> Request:
    connect_start, connect_end = (
        float(r["connect_start_ms"]),
        float(r["connect_end_ms"]),
    )
    tls_start, tls_end = float(r["tls_start_ms"]), float(r["tls_end_ms"])
    new = connect_start >= 0 and connect_end >= connect_start and not r.get("reused", False)
    tcp_end = tls_start if tls_start >= 0 else connect_end
    send, headers, end = (
        float(r["send_start_ms"]),
        float(r["headers_end_ms"]),
        float(r["end_ms"]),
    )
    if send < 0 or headers < send or end < headers:
        raise LoadError(f"{r.get('url')}: request times out of order (send {send}, headers {headers}, end {end})")
    return Request(
        url=str(r["url"]),
        status=int(r["status"]),
        protocol=str(r.get("protocol", "")),
        new_connection=new,
        dns_ms=_span(float(r["dns_start_ms"]), float(r["dns_end_ms"])) if new else None,
        tcp_ms=_span(connect_start, tcp_end) if new else None,
        tls_ms=_span(tls_start, tls_end) if new else None,
        first_byte_ms=headers - send,
        transfer_ms=end - headers,
        end_ms=end,
    )


def parse_result(result: dict[str, Any], expect: int) -> PageLoad:
    """The driver's answer for one load; every one of the page's `expect` objects must be a 200."""
    if not result.get("ok"):
        raise LoadError(f"load of {result.get('url')}: {result.get('error')}")
    raw = result.get("requests")
    if not isinstance(raw, list):
        raise LoadError("driver answer has no request list")
    requests = [parse_request(r) for r in raw]
    failed = [f"{r.url}: {r.status}" for r in requests if r.status != 200]
    if failed:
        raise LoadError(f"not 200: {', '.join(failed[:5])}")
    if len(requests) != expect:
        raise LoadError(f"{len(requests)} requests, the page has {expect} objects")
    load_event = float(result["load_ms"])
    if load_event < 0:
        raise LoadError("no load event")
    last = max(r.end_ms for r in requests)
    return PageLoad(max(load_event, last) / 1000, load_event / 1000, requests, result)


def median_breakdown(loads: Sequence[PageLoad]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for phase in PHASES:
        values = [v for ld in loads if (v := ld.breakdown()[phase]) is not None]
        out[phase] = statistics.median(values) if values else None
    return out


class ModernDriver:
    """bench/browser/load_modern.js inside a namespace: one JSON request per line, one answer per line."""

    SCRIPT = str(procs.REPO / "bench/browser/load_modern.js")

    def __init__(self, argv_prefix: list[str], timeout_s: float) -> None:
        env = dict(os.environ, WEB_LOAD_TIMEOUT_MS=str(int(timeout_s * 1000)))
        self.timeout_s = timeout_s
        self.proc = subprocess.Popen(
            [*argv_prefix, "node", self.SCRIPT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
            start_new_session=True,
        )
        ready = self._line(60.0)
        if not ready.get("ready"):
            self.close()
            raise procs.ToolError(f"page-load driver not ready: {ready}")

    def _line(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        readable, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if readable else ""
        if not line:
            raise procs.ToolError(f"page-load driver: no answer in {timeout:.0f} s (exit {self.proc.poll()})")
        data: dict[str, Any] = json.loads(line)
        return data

    def load(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self._line(self.timeout_s + 30)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=15)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(timeout=5)
