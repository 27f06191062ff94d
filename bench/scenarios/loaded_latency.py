"""Latency under load: a ping and a new small fetch while a bulk download fills the satellite link,
through Perigee at both ends with the appliance's defaults and with the former default (hybla)."""

from __future__ import annotations

import json
import statistics
import threading
import time
from typing import Any

from bench import hybla, lab, procs, records
from bench.context import Context
from bench.lab import SERVER_V4
from bench.profiles import figures
from bench.tools import gwconfig
from bench.transfer import attempt

NAME = "loaded-latency"
KIND = "fairness"  # how a bulk flow treats the other traffic on its link
TITLE = "Latency under load: a ping and a new small fetch during a bulk download on geo-hts"
DESCRIPTION = (
    "satlab `geo-hts` (50 Mbit/s forward, 600 ms RTT, 1-BDP buffer) with Perigee at both ends. A download "
    "server → client of `size` fills the forward link; from `probe_at_s` after it starts, every `probe_every_s`: "
    "`ping` from the client to the server (ICMP is routed, not split: it waits in whatever queue the bulk flow "
    "keeps at the emulator) and a fetch of a 1,000-byte object over a new HTTP connection (`satlab.clients fetch`, "
    "split like any flow: on the peer path one round trip), timed from its connect() to the last byte. "
    "`default`: the gateways as satlab starts them; `former-default`: the same with `satellite.congestion_control` "
    "hybla and the two-BDP receive buffer satlab used before. Target: both within RTT + 50 ms (650 ms)."
)
PROFILE = "geo-hts"
TARGET_OVER_RTT_MS = 50.0
PARAMS: dict[str, dict[str, Any]] = {
    "quick": {"size": 100_000_000, "cap_s": 30, "probe_at_s": 4.0, "probe_every_s": 2.0, "probes": 4, "repeats": 1},
    "full": {"size": 150_000_000, "cap_s": 40, "probe_at_s": 4.0, "probe_every_s": 2.0, "probes": 8, "repeats": 2},
}
VARIANTS = ("default", "former-default")
SMALL_URL = f"http://{SERVER_V4}/nocache/bytes/1000"


def configure(lb: lab.Lab, originals: dict[str, dict[str, Any]], variant: str) -> None:
    for role, cfg in originals.items():
        new = json.loads(json.dumps(cfg))
        new["revision"] = f"bench-{NAME}-{variant}"
        if variant == "former-default":
            new["satellite"]["congestion_control"] = "hybla"
            new["satellite"]["rcvbuf_bytes"] = new["satellite"]["sndbuf_bytes"]
        gwconfig.put_config(gwconfig.socket_path(lb.prefix, role), new)
    time.sleep(2.0)  # the peer path's pool refills with the new settings


def ping_ms(lb: lab.Lab) -> float | None:
    out = procs.run(lb.exec_argv("client", ["ping", "-n", "-c", "1", "-W", "3", SERVER_V4]), timeout=10, check=False)
    for line in out.stdout.splitlines():
        if "time=" in line:
            return float(line.split("time=")[1].split()[0])
    return None


def small_fetch_ms(lb: lab.Lab) -> float | None:
    argv = lb.exec_argv("client", procs.tool_argv("satlab.clients", "fetch", SMALL_URL, "--json"))
    out = procs.run(argv, timeout=20, check=False)
    try:
        return float(json.loads(out.stdout.strip().splitlines()[-1])["duration_s"]) * 1000
    except (ValueError, KeyError, IndexError):
        return None


def probe(lb: lab.Lab, params: dict[str, Any], pings: list[float], fetches: list[float]) -> None:
    time.sleep(float(params["probe_at_s"]))
    for _ in range(int(params["probes"])):
        t = time.monotonic()
        for value, into in ((ping_ms(lb), pings), (small_fetch_ms(lb), fetches)):
            if value is not None:
                into.append(value)
        time.sleep(max(0.0, float(params["probe_every_s"]) - (time.monotonic() - t)))


def run(ctx: Context, params: dict[str, Any]) -> list[records.Record]:
    link = figures(PROFILE)
    reason = hybla.ensure("hybla") or hybla.ensure("hybla_ld")
    if reason:
        return [records.skipped(NAME, v, reason) for v in VARIANTS]
    samples: dict[str, dict[str, list[float]]] = {v: {"ping": [], "fetch": [], "bulk_s": []} for v in VARIANTS}
    with lab.running(PROFILE, gateway="both") as lb:
        originals = {r: gwconfig.get_config(gwconfig.socket_path(lb.prefix, r)) for r in ("hub", "terminal")}
        for rep in range(int(params["repeats"])):
            for v in VARIANTS:
                configure(lb, originals, v)
                ctx.log(f"{NAME}: {v} run {rep + 1}")
                s = samples[v]
                th = threading.Thread(target=probe, args=(lb, params, s["ping"], s["fetch"]), daemon=True)
                th.start()
                tr = attempt(lb, "cubic", int(params["size"]), float(params["cap_s"]), sample_gateway_leg=True)
                th.join(timeout=60)
                if not isinstance(tr, str) and tr.completion_s() is not None:
                    s["bulk_s"].append(float(tr.completion_s() or 0))
    out: list[records.Record] = []
    rtt_ms = link.rtt_s * 1000
    for v, s in samples.items():
        for what in ("ping", "fetch"):
            if not s[what]:
                out.append(records.missing(NAME, v, f"{what}_median", "ms", "no probe answered"))
                continue
            runs = ", ".join(f"{x:.0f}" for x in s[what])
            out.append(records.measured(NAME, v, f"{what}_median", statistics.median(s[what]), "ms", f"probes: {runs}"))
            out.append(records.measured(NAME, v, f"{what}_max", max(s[what]), "ms"))
            out.append(records.measured(NAME, v, f"{what}_over_rtt", statistics.median(s[what]) - rtt_ms, "ms"))
        if s["bulk_s"]:
            out.append(records.measured(NAME, v, "bulk_completion", statistics.median(s["bulk_s"]), "s"))
    return out


def doc_extra(recs: list[records.Record]) -> str:
    by = {(r.variant, r.metric): r.value for r in recs}
    lines = []
    for v in VARIANTS:
        for what in ("ping", "fetch"):
            over = by.get((v, f"{what}_over_rtt"))
            if over is None:
                continue
            verdict = "met" if over <= TARGET_OVER_RTT_MS else "NOT met"
            lines.append(
                f"- {v}: {what} median {by.get((v, f'{what}_median')):.0f} ms = RTT + {over:.0f} ms, "
                f"target RTT + {TARGET_OVER_RTT_MS:g} ms: {verdict}."
            )
    return "\n".join(lines)
