"""From the load's transfer records and the fault events: totals, and per fault the time until
new flows were served again."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PROBES = ("probe-tcp", "probe-http")


@dataclass(frozen=True)
class Recovery:
    """Seconds from the fault (or the end of its condition) until a probe of each kind that
    started after it completed intact; None when none did before `until`."""

    tcp_s: float | None
    http_s: float | None
    failed_probes: int  # probes started in [t_ref, until) that failed

    @property
    def worst_s(self) -> float | None:
        if self.tcp_s is None or self.http_s is None:
            return None
        return max(self.tcp_s, self.http_s)


def recovery(records: list[dict[str, Any]], t_ref: float, until: float) -> Recovery:
    first: dict[str, float | None] = dict.fromkeys(PROBES)
    failed = 0
    for r in records:
        if r["kind"] not in PROBES or not t_ref <= r["t0"] < until:
            continue
        if r["sha256_ok"]:
            done = r["t1"] - t_ref
            cur = first[r["kind"]]
            if cur is None or done < cur:
                first[r["kind"]] = done
        else:
            failed += 1
    return Recovery(first["probe-tcp"], first["probe-http"], failed)


@dataclass(frozen=True)
class Totals:
    transfers: int  # completed and verified, load and probes
    by_kind: dict[str, int]
    verified_bytes: int
    corrupted_bytes: int
    broken: int  # ended early (reset, stall timeout, refused): never counted as verified
    cache_hits: int


def totals(records: list[dict[str, Any]]) -> Totals:
    by_kind: dict[str, int] = {}
    verified = corrupted = broken = transfers = hits = 0
    for r in records:
        corrupted += int(r["corrupted_bytes"])
        if r["sha256_ok"]:
            transfers += 1
            verified += int(r["size"])
            by_kind[r["kind"]] = by_kind.get(r["kind"], 0) + 1
            hits += str(r.get("x_cache", "")).startswith("HIT")
        elif not r["complete"]:
            broken += 1
    return Totals(transfers, by_kind, verified, corrupted, broken, hits)


@dataclass(frozen=True)
class ControlTotals:
    """The control-plane load's answers. "Down": while the API was killed and not yet back."""

    reads: int
    reads_ok: int
    read_p99_s: float | None
    stored: int  # config versions the API confirmed
    applied: int  # applies the gateway took and the API recorded
    refused: dict[str, int]  # writes and applies answered with an error: "status code" -> count
    server_errors: int  # HTTP 500: an unhandled exception's answer
    hung: int  # no answer within the client's timeout
    bad_outside_down: list[str]  # reads not 200, writes without an answer, while the API was up


def control_plane(calls: list[Any], down: list[tuple[float, float]]) -> ControlTotals:
    def is_down(t: float) -> bool:
        return any(a <= t <= b for a, b in down)

    reads = [c for c in calls if c.kind == "read"]
    ok = sorted(c.t1 - c.t0 for c in reads if c.status == 200)
    refused: dict[str, int] = {}
    bad: list[str] = []
    for c in calls:
        if c.kind != "read" and c.status > 0 and (c.status != 200 or c.code):
            key = f"{c.kind} {c.status} {c.code}"
            refused[key] = refused.get(key, 0) + 1
        if is_down(c.t0) or c.status == -1:
            continue
        if (c.kind == "read" and c.status != 200) or c.status == 0:
            bad.append(f"{c.kind} {c.path} {c.status} {c.code}")
    return ControlTotals(
        reads=len(reads),
        reads_ok=len(ok),
        read_p99_s=ok[min(len(ok) - 1, int(len(ok) * 0.99))] if ok else None,
        stored=sum(1 for c in calls if c.kind == "write" and c.status == 200),
        applied=sum(1 for c in calls if c.kind == "apply" and c.status == 200 and not c.code),
        refused=refused,
        server_errors=sum(1 for c in calls if c.status == 500),
        hung=sum(1 for c in calls if c.status == -1),
        bad_outside_down=bad,
    )
