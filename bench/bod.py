"""Shared pieces of the BoD scenarios (caini-bod, bod-tuning): one long satellite download with optional
wired disturbance, the gateway's BoD-tuned or untuned config, and pure summaries of the series.

Topology (Caini et al., Fig. 1): the sender is the `cross` host, behind the hub's emulated terrestrial
link (the paper's R1–R2, set to `WIRED_RATE_BPS` and 12.5 ms each way: 25 ms wired RTT), so the
satellite flow, a UDP spike and the wired TCP flows share that link exactly as in the paper; the hub
is the paper's R2 (where PEPsal ran, and where Perigee's splitter runs).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from bench import hybla, lab, metrics, procs
from bench.tools import gwconfig
from bench.tools.ss_parse import busiest_per_sample

SAT_PORT = 5201
WIRED_PORT0 = 5301  # the wired flows use WIRED_PORT0, +1, ...
UDP_PORT = 9100
# Caini et al. sec. 6: the wired R1–R2 link is 10 Mbit/s; the wired flows' RTT is 25 ms.
WIRED_RATE_BPS = 10_000_000
WIRED_ONE_WAY_MS = 12.5
WIRED_QUEUE_S = 0.1  # drop-tail queue of 100 ms at the wired rate (the paper's R1 is not specified)
ETHERNET_HEADER = 14  # the emulator charges whole frames; the UDP rate is counted the same way


@dataclass
class FlowRun:
    """One satellite download: byte counts since connect(), the disturbance's window, the leg's cc."""

    samples: list[tuple[float, float]]
    cc_actual: str = ""
    cwnd: list[tuple[float, float]] = field(default_factory=list)
    event: tuple[float, float] | None = None  # (start, end) s since connect()
    wired_bps: float | None = None  # the wired flows' aggregate goodput while they ran
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "cc_actual": self.cc_actual,
            "cwnd": self.cwnd,
            "event": self.event,
            "wired_bps": self.wired_bps,
            "error": self.error,
        }


# --- pure summaries ----------------------------------------------------------------------------


def window_goodput_bps(samples: metrics.Series, t_from: float, t_to: float, rate_bps: float) -> float:
    """Average link-feasible goodput over [t_from, t_to] (s since connect())."""
    if t_to <= t_from:
        raise ValueError("empty window")
    progress = metrics.link_progress(samples, rate_bps)
    got = metrics.cumulative_at(progress, t_to) - metrics.cumulative_at(progress, t_from)
    return got * 8 / (t_to - t_from)


def time_to_fraction_after(
    samples: metrics.Series,
    rate_bps: float,
    after_s: float,
    fraction: float = 0.9,
) -> float | None:
    """Seconds after `after_s` until the trailing 1 s goodput is back at fraction × rate (None: never)."""
    for t, bps in metrics.goodput_series(metrics.link_progress(samples, rate_bps)):
        if t >= after_s + metrics.GOODPUT_WINDOW_S - 1e-9 and bps >= fraction * rate_bps - 1e-9:
            return t - after_s
    return None


def goodput_line(samples: metrics.Series, rate_bps: float, t_end: float | None = None) -> list[tuple[float, float]]:
    """(t, Mbit/s) of the link-feasible 1 s goodput, for plots."""
    return [(t, v / 1e6) for t, v in metrics.goodput_series(metrics.link_progress(samples, rate_bps), t_end=t_end)]


# --- the gateway's config ----------------------------------------------------------------------


def gateway_roles(where: str | None) -> list[str]:
    return [] if not where else ["hub", "terminal"] if where == "both" else [where]


def configure(lb: lab.Lab, where: str | None, profile: str, tuned: bool) -> dict[str, dict[str, int]]:
    """PUT the BoD-tuned (the API's derivation for the link's DAMA profile) or the daemon's untuned
    settings into each gateway of the lab; returns what each role now runs."""
    applied = {}
    for role in gateway_roles(where):
        sock = gwconfig.socket_path(lb.prefix, role)
        cfg = gwconfig.get_config(sock)
        if tuned:
            cfg = gwconfig.apply_tuning(cfg, gwconfig.profile_bod_inputs(profile, role))
        else:
            cfg = gwconfig.untuned(cfg)
        gwconfig.put_config(sock, cfg)
        applied[role] = gwconfig.tuned_settings(gwconfig.get_config(sock))
    return applied


def reset_hybla_params() -> None:
    """Put Hybla's host-wide defaults back after a tuned gateway, so a later scenario's Hybla is
    not held to this link's base RTT and cwnd ceiling. Only the kernel's tcp_hybla needs it (its
    rtt0 is host-wide); with Perigee's BPF Hybla a gateway writes its own namespace's entry, which
    its clean stop removes, and this leaves the (unwritten) host-wide entry at the defaults."""
    if "hybla" in hybla.available_ccs():
        procs.run(
            [
                hybla.PERIGEE,
                "hybla",
                "set",
                "--rtt0-ms",
                "25",
                "--base-rtt-ms",
                "0",
                "--cwnd-max",
                "0",
            ],
            timeout=30,
            check=False,
        )


def wait_bod_idle(lb: lab.Lab, timeout_s: float = 10.0) -> None:
    """Wait until the satellite queues are empty and the RBDC grant is back to 0 both ways, so the
    next flow starts cold."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            stats = lb.link_stats()
            if not any(stats[d].get("granted_bps") or stats[d].get("queue_bytes") for d in ("forward", "return")):
                return
        except (lab.LabUnavailable, KeyError, ValueError):
            return
        time.sleep(0.5)


def flush_link(lb: lab.Lab, profile: str) -> None:
    """Drain the satellite queues at the carrier rate with BoD off, then switch the profile's BoD
    back on, which starts from no grant: the next measurement starts cold, whatever the last one
    left queued (at CRA alone 1 MB would take minutes). Measurements must end their flows (sized
    transfers): destroying a relayed socket under the gateway (`ss -K`) broke later connections."""
    bod_params = _profile_bod(profile)
    if not bod_params:
        return
    lb.link_set("--dir", "both", "--bod", "off")
    end = time.monotonic() + 15.0
    while time.monotonic() < end:
        stats = lb.link_stats()
        if not any(stats[d].get("queue_bytes") for d in ("forward", "return")):
            break
        time.sleep(0.3)
    lb.link_set(
        "--dir",
        "both",
        "--bod",
        "on",
        "--bod-cra",
        str(int(bod_params["cra_bps"])),
        "--bod-max",
        str(int(bod_params["rbdc_max_bps"])),
        "--bod-superframe",
        str(bod_params["superframe_ms"]),
        "--bod-delay",
        str(bod_params["allocation_delay_ms"]),
    )


def _profile_bod(profile: str) -> dict[str, Any]:
    from satlab.profiles import PROFILES

    return dict(PROFILES[profile].forward.get("bod") or {})


# --- one run -----------------------------------------------------------------------------------


def set_wired_link(lb: lab.Lab) -> None:
    lb.link_set(
        "--link",
        "cross",
        "--rate",
        str(WIRED_RATE_BPS),
        "--delay-ms",
        str(WIRED_ONE_WAY_MS),
        "--buffer",
        str(int(WIRED_RATE_BPS * WIRED_QUEUE_S / 8)),
    )


def _serve(lb: lab.Lab, port: int, cc: str, timeout: float) -> procs.Background:
    srv = procs.Background(lab.cross_serve_argv(lb, port, cc, timeout))
    srv.wait_line("LISTENING", timeout=15)
    return srv


def _fetch(lb: lab.Lab, role: str, port: int, timeout: float) -> procs.Background:
    return procs.Background(lab.cross_fetch_argv(lb, role, port, timeout))


def _udp_spike(lb: lab.Lab, rate_bps: float, length_s: float) -> tuple[procs.Background, procs.Background]:
    sink = procs.Background(
        lb.exec_argv(
            "server",
            procs.tool_argv(
                "bench.tools.udp",
                "sink",
                "--bind",
                lab.SERVER_V4,
                "--port",
                str(UDP_PORT),
                "--idle",
                "2",
                "--timeout",
                str(length_s + 15),
            ),
        )
    )
    sink.wait_line("LISTENING", timeout=15)
    blast = procs.Background(
        lb.exec_argv(
            "cross",
            procs.tool_argv(
                "bench.tools.udp",
                "blast",
                "--to",
                lab.SERVER_V4,
                "--port",
                str(UDP_PORT),
                "--rate-bps",
                str(rate_bps),
                "--duration",
                str(length_s),
                "--l2-overhead",
                str(ETHERNET_HEADER),
            ),
        )
    )
    return sink, blast


def sat_download(
    lb: lab.Lab,
    cc: str,
    duration_s: float,
    gateway: bool,
    disturbance: dict[str, Any] | None = None,
) -> FlowRun:
    """cross → client for `duration_s` with `cc` on the sender's socket; optionally a UDP spike
    (`{"kind": "udp-spike", "at_s", "length_s", "rate_bps"}`) or wired TCP flows cross → server
    (`{"kind": "wired-tcp", "at_s", "flows", "cc"}`) starting `at_s` after the download."""
    lb.flush_tcp_metrics()
    dist = disturbance or {}
    background: list[procs.Background] = []
    sampler = None
    try:
        srv = _serve(lb, SAT_PORT, cc, duration_s)
        background.append(srv)
        if gateway:
            sampler = procs.Background(
                lb.exec_argv(
                    "hub",
                    procs.tool_argv(
                        "bench.tools.ss_sampler",
                        "--local-port",
                        str(SAT_PORT),
                        "--local-port",
                        str(lab.PEER_PORT),
                        "--duration",
                        str(duration_s + 5),
                    ),
                )
            )
            background.append(sampler)
        fetch = _fetch(lb, "client", SAT_PORT, duration_s)
        background.append(fetch)
        launched = time.monotonic()
        wired: list[procs.Background] = []
        spike = None
        if dist:
            time.sleep(max(0.0, launched + float(dist["at_s"]) - time.monotonic()))
            if dist["kind"] == "udp-spike":
                spike = _udp_spike(lb, float(dist["rate_bps"]), float(dist["length_s"]))
                background += spike
            elif dist["kind"] == "wired-tcp":
                left = duration_s - float(dist["at_s"])
                for i in range(int(dist["flows"])):
                    background.append(_serve(lb, WIRED_PORT0 + i, dist["cc"], left))
                    wired.append(_fetch(lb, "server", WIRED_PORT0 + i, left))
                background += wired
            else:
                raise ValueError(f"unknown disturbance {dist['kind']!r}")
        got = fetch.result(timeout=duration_s + 30)
        if got.get("t_start") is None:
            raise procs.ToolError(f"satellite fetch failed: {got.get('error')}")
        t0 = float(got["t_start"])
        run = FlowRun(
            samples=[(round(t - t0, 4), float(b)) for t, b in got["samples"]],
            error=got.get("error", ""),
        )
        served = srv.result(timeout=15)
        run.cc_actual = served.get("cc", "")
        if spike is not None:
            blasted = spike[1].result(timeout=30)
            run.event = (
                round(blasted["t_start"] - t0, 3),
                round(blasted["t_end"] - t0, 3),
            )
        if wired:
            outs = [w.result(timeout=30) for w in wired]
            start = min(o["t_start"] for o in outs if o.get("t_start"))
            end = max(o["t_done"] for o in outs if o.get("t_done"))
            run.event = (round(start - t0, 3), round(end - t0, 3))
            total = sum(int(o.get("bytes", 0)) for o in outs)
            run.wired_bps = total * 8 / max(end - start, 1e-3)
        if sampler is not None:
            sampler.terminate()
            ss = busiest_per_sample(sampler.result(timeout=10))
            run.cc_actual = next((s["cc"] for s in ss if "cc" in s), "")
            run.cwnd = [(round(s["t"] - t0, 3), float(s["cwnd"])) for s in ss if "cwnd" in s]
        return run
    finally:
        for bg in background:
            bg.close()


def check_run(run: FlowRun, cc: str, gateway: bool) -> str | None:
    """Why a run cannot be counted (the flow was not split, or ran another cc); None when it can."""
    if gateway and not run.cwnd:
        return "no intercepted socket seen at the hub: the flow did not go through the gateway"
    if not gateway and run.cc_actual != cc:
        return f"sender ran {run.cc_actual!r}, not {cc}"
    if not run.samples or run.samples[-1][1] <= 0:
        return f"no data received: {run.error}"[:300]
    return None
