"""One measured download server → client across a running lab: goodput and cwnd over time."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from bench import hybla, metrics, procs, records
from bench.lab import PEER_PORT, SERVER_V4, Lab
from bench.tools.ss_parse import LIMITED_KEYS as LIMITED
from bench.tools.ss_parse import busiest_per_sample

PORT = 5201  # not satlab's :80 / :5001 servers


@dataclass
class Transfer:
    cc: str
    size_bytes: int
    bytes_received: int
    samples: list[tuple[float, float]]  # (s since connect(), cumulative bytes)
    cwnd: list[tuple[float, float]] = field(default_factory=list)  # (s, segments) of the satellite-leg sender
    rtt_ms: list[tuple[float, float]] = field(default_factory=list)
    cc_actual: str = ""
    retransmits: int | None = None
    error: str = ""
    t_start: float = 0.0  # CLOCK_MONOTONIC of the receiver's connect(): where the samples' t = 0 is
    # The satellite-leg sender's busy / rwnd_limited / sndbuf_limited time at its last sample
    # (ms): how long the receiver's window or the sender's own buffer held it back.
    limited_ms: dict[str, float] = field(default_factory=dict)

    @property
    def completed(self) -> bool:
        return self.bytes_received >= self.size_bytes

    @property
    def elapsed_s(self) -> float:
        return self.samples[-1][0] if self.samples else 0.0

    def completion_s(self) -> float | None:
        return metrics.completion_time(self.samples, self.size_bytes)

    def goodput_bps(self) -> float:
        """Average goodput: bytes delivered over the time from connect() to the last byte."""
        return self.bytes_received * 8 / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "cc": self.cc,
            "cc_actual": self.cc_actual,
            "size_bytes": self.size_bytes,
            "bytes_received": self.bytes_received,
            "samples": self.samples,
            "cwnd": self.cwnd,
            "rtt_ms": self.rtt_ms,
            "retransmits": self.retransmits,
            "error": self.error,
            "limited_ms": self.limited_ms,
        }


def download(
    lab: Lab,
    cc: str,
    size_bytes: int,
    timeout_s: float,
    sample_gateway_leg: bool = False,
    port: int = PORT,
) -> Transfer:
    """server sends size_bytes to client with congestion control `cc` on its socket, from `port`
    (a gateway's classes may treat ports differently).

    End to end, cwnd comes from the sender's own TCP_INFO. With the gateway at the hub, the satellite
    leg is the gateway's socket, so cwnd comes from polling `ss -tin` in the hub namespace instead.
    """
    lab.flush_tcp_metrics()
    serve_argv = lab.exec_argv(
        "server",
        procs.tool_argv(
            "bench.tools.flow",
            "serve",
            "--bind",
            SERVER_V4,
            "--port",
            str(port),
            "--cc",
            cc,
            "--bytes",
            str(size_bytes),
            "--timeout",
            str(timeout_s + 5),
        ),
    )
    fetch_argv = lab.exec_argv(
        "client",
        procs.tool_argv(
            "bench.tools.flow",
            "fetch",
            "--connect",
            SERVER_V4,
            "--port",
            str(port),
            "--bytes",
            str(size_bytes),
            "--timeout",
            str(timeout_s),
        ),
    )
    with procs.Background(serve_argv) as server:
        server.wait_line("LISTENING", timeout=15)
        sampler = None
        if sample_gateway_leg:
            sampler = procs.Background(
                lab.exec_argv(
                    "hub",
                    procs.tool_argv(
                        "bench.tools.ss_sampler",
                        "--local-port",
                        str(port),
                        "--local-port",
                        str(PEER_PORT),
                        "--duration",
                        str(timeout_s + 5),
                    ),
                )
            )
        try:
            got = procs.run(fetch_argv, timeout=timeout_s + 20, check=False)
            if not got.stdout.strip():
                raise procs.ToolError(f"fetch printed nothing: {got.stderr.strip()[-1000:]}")

            fetched = json.loads(got.stdout.strip().splitlines()[-1])
            if sampler is not None:
                sampler.terminate()
                ss_samples = busiest_per_sample(sampler.result(timeout=10))
        finally:
            if sampler is not None:
                sampler.close()
        try:
            served = server.result(timeout=15)
        except procs.ToolError as exc:
            served = {"error": str(exc), "tcp_info": []}
    t0 = fetched.get("t_start")
    if t0 is None:
        raise procs.ToolError(f"fetch failed: {fetched.get('error')}")
    result = Transfer(
        cc=cc,
        size_bytes=size_bytes,
        bytes_received=int(fetched["bytes"]),
        samples=[(round(t - t0, 4), float(b)) for t, b in fetched["samples"]],
        cc_actual=served.get("cc", ""),
        error=fetched.get("error") or served.get("error", ""),
        t_start=float(t0),
    )
    if sample_gateway_leg:
        result.cwnd = [(round(s["t"] - t0, 4), float(s["cwnd"])) for s in ss_samples if "cwnd" in s]
        result.rtt_ms = [(round(s["t"] - t0, 4), float(s["rtt_ms"])) for s in ss_samples if s.get("rtt_ms")]
        # The last sample's: a warm peer connection runs the config's default until the flow's
        # class retunes it, so an early sample may show that one.
        result.cc_actual = next((s["cc"] for s in reversed(ss_samples) if "cc" in s), "")
        last: dict[str, Any] = next((s for s in reversed(ss_samples) if "busy_ms" in s), {})
        # ss prints a limited time only when it is not zero.
        result.limited_ms = {k: float(last.get(f"{k}_ms", 0.0)) for k in LIMITED} if last else {}
    else:
        infos = served.get("tcp_info", [])
        result.cwnd = [(round(i["t"] - t0, 4), float(i["snd_cwnd"])) for i in infos if "snd_cwnd" in i]
        result.rtt_ms = [(round(i["t"] - t0, 4), i["rtt_us"] / 1000) for i in infos if i.get("rtt_us")]
        if infos:
            result.retransmits = int(infos[-1].get("total_retrans", 0))
            names = {"busy": "busy_time_us"} | {k: f"{k}_us" for k in LIMITED[1:]}
            result.limited_ms = {k: infos[-1][us] / 1000 for k, us in names.items() if us in infos[-1]}
    return result


def attempt(
    lab: Lab,
    cc: str,
    size_bytes: int,
    timeout_s: float,
    sample_gateway_leg: bool = False,
    port: int = PORT,
) -> Transfer | str:
    """download(), or the reason it could not run (hybla missing, a tool failed): never a number."""
    if cc == "hybla" or sample_gateway_leg:  # the gateway's satellite leg asks for hybla too
        reason = hybla.ensure()
        if reason and cc == "hybla":
            return reason
    try:
        return download(lab, cc, size_bytes, timeout_s, sample_gateway_leg, port)
    except procs.ToolError as exc:
        return f"transfer failed: {exc}"[:300]


def completion_record(scenario: str, variant: str, tr: Transfer) -> records.Record:
    """The transfer's completion time, or (not finished) a missing record saying how far it got."""
    done = tr.completion_s()
    if done is None:
        return records.missing(
            scenario,
            variant,
            "completion",
            "s",
            f"{tr.bytes_received} of {tr.size_bytes} bytes in {tr.elapsed_s:.0f} s",
        )
    return records.measured(scenario, variant, "completion", done, "s")


def limit_records(
    scenario: str, key: str, tr: Transfer, limit: float, cap: float, extra: list[records.Record] | None = None
) -> list[records.Record]:
    """A capped transfer against its physical limit: limit, completion and completion / limit (or how
    far it got in the cap), `extra` (a scenario's own figures), goodput, the sender's largest window
    and its retransmissions."""
    out = [records.measured(scenario, key, "limit", limit, "s")]
    done = tr.completion_s()
    if done is None:
        note = f"{tr.bytes_received / 1e6:.1f} of {tr.size_bytes / 1e6:g} MB in the {cap:g} s cap"
        out.append(records.missing(scenario, key, "completion", "s", note))
        out.append(records.missing(scenario, key, "vs_limit", "x", f"> {cap / limit:.2f}x: {note}"))
    else:
        out.append(records.measured(scenario, key, "completion", done, "s"))
        out.append(records.measured(scenario, key, "vs_limit", done / limit, "x"))
    out += extra or []
    out.append(records.measured(scenario, key, "goodput", tr.goodput_bps() / 1e6, "Mbit/s"))
    if tr.cwnd:
        out.append(records.measured(scenario, key, "max_cwnd", max(c for _, c in tr.cwnd), "segments"))
    if tr.retransmits is not None:
        out.append(records.measured(scenario, key, "retransmits", tr.retransmits, "segments"))
    return out
