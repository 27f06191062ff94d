"""Can the control plane list 10,000 live flows quickly and ingest 1,000 closed flows a second?"""

from __future__ import annotations

import json
from typing import Any

from bench import procs, records
from bench.context import Context

NAME = "api-flows"
KIND = "control-plane"
TITLE = "Control plane: live-flow listing and closed-flow ingestion"
DESCRIPTION = (
    "`bench/api/flows.py` runs the real FastAPI app under uvicorn on a Unix socket with a fake "
    "gateway holding 10,000 live flows (a Bearer-token client in its own process, as automation or a browser would "
    "be). It times "
    "`GET /api/v1/flows` unfiltered and filtered by action (targets: p99 under 50 ms), then feeds "
    "1,000 closed flows into the gateway's ring each second through the real collector path (HTTP "
    "collect, SQLite insert, commit) while a second client polls what an open dashboard reads each "
    "second (live flows, the newest history page, a throughput series). Sustainable rate = records "
    "per tick / median tick time (target ≥ 1,000 records/s)."
)
PARAMS: dict[str, dict[str, Any]] = {
    "quick": {"flows": 10_000, "requests": 50, "ingest_seconds": 5},
    "full": {"flows": 10_000, "requests": 200, "ingest_seconds": 15},
}
LIST_P99_TARGET_MS = 50.0
INGEST_TARGET_PER_S = 1000


def parse_summary(stdout: str) -> dict[str, Any]:
    """The benchmark's JSON summary: its last non-empty output line."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise ValueError("bench.api.flows printed nothing")
    summary = json.loads(lines[-1])
    if not isinstance(summary, dict) or "list_live_flows" not in summary:
        raise ValueError(f"not a bench.api.flows summary: {lines[-1][:200]}")
    return summary


def to_records(summary: dict[str, Any]) -> list[records.Record]:
    listing = summary["list_live_flows"]
    ingest = summary["ingest_closed_flows"]
    out: list[records.Record] = []
    for variant in ("unfiltered", "filtered_action"):
        lat = listing[variant]
        label = f"list-{listing['flows']}-{variant.replace('_', '-')}"
        note = f"target p99 < {LIST_P99_TARGET_MS:g} ms; answer {lat['bytes']} bytes"
        out.append(records.measured(NAME, label, "latency_p50", lat["p50_ms"], "ms"))
        out.append(records.measured(NAME, label, "latency_p99", lat["p99_ms"], "ms", note))
    variant = f"ingest-{ingest['records_per_tick']}-per-s"
    out.append(records.measured(NAME, variant, "tick_p50", ingest["tick_p50_ms"], "ms"))
    out.append(records.measured(NAME, variant, "tick_max", ingest["tick_max_ms"], "ms"))
    out.append(
        records.measured(
            NAME,
            variant,
            "sustainable_rate",
            ingest["sustainable_records_per_s"],
            "records/s",
            f"target >= {INGEST_TARGET_PER_S} records/s",
        )
    )
    out.append(
        records.measured(
            NAME,
            variant,
            "dashboard_poll_p99",
            ingest["poll_p99_ms"],
            "ms",
            f"{ingest['poll_requests']} dashboard reads during ingestion",
        )
    )
    return out


def run(ctx: Context, params: dict[str, Any]) -> list[records.Record]:
    argv = [
        procs.PYTHON,
        "-m",
        "bench.api.flows",
        "--flows",
        str(params["flows"]),
        "--requests",
        str(params["requests"]),
        "--ingest-seconds",
        str(params["ingest_seconds"]),
    ]
    proc = procs.run(argv, timeout=300)
    return to_records(parse_summary(proc.stdout))
