"""Link profiles: one table, each entry says where its numbers come from.

Parameters are per direction, in the JSON shape the link emulator (lab/emulator) takes:
delay_ms, jitter_ms, rate_bps, buffer_bytes, per, ber, gilbert, bod.
forward = hub -> terminal (toward users), return = terminal -> hub.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

Params = dict[str, Any]

# Skyplex DAMA figures (Caini et al., "Analysis of TCP live experiments on a real GEO satellite
# testbed", sec. 3.3): 44 kbit/s slot granularity and static CRA per terminal, RBDC requests once
# per 820 ms super-frame, 1.346 s theoretical allocation delay.
# No backlog_horizon_ms here: the emulator's default (820 ms, one superframe; docs/lab.md) applies,
# so requests also ask for the rate that drains the queued bytes within one superframe (the volume
# part of a DVB-RCS terminal's requests); `--bod-backlog 0` gives rate-only requests.
SKYPLEX_BOD: Params = {
    "cra_bps": 44_000,
    "rbdc_max_bps": 1_144_000,
    "superframe_ms": 820,
    "allocation_delay_ms": 1346,
    "granularity_bps": 44_000,
}


def direction(delay_ms: float, rate_bps: int, buffer_bytes: int, *, jitter_ms: float = 0.0,
              per: float = 0.0, ber: float = 0.0, bod: Params | None = None) -> Params:
    return {
        "delay_ms": delay_ms, "jitter_ms": jitter_ms, "rate_bps": rate_bps,
        "buffer_bytes": buffer_bytes, "per": per, "ber": ber, "gilbert": None,
        "bod": copy.deepcopy(bod),
    }


def bdp_bytes(rate_bps: float, rtt_ms: float) -> int:
    return int(rate_bps * rtt_ms / 1000 / 8)


@dataclass(frozen=True)
class Profile:
    name: str
    summary: str
    source: str
    forward: Params
    ret: Params


PROFILES: dict[str, Profile] = {
    # Caini et al. (seed 002): Skyplex on HotBird 6, Low Rate channel shared by 22 terminals ->
    # 1.144 Mbit/s nominal; RTT "more than 600 ms"; the satellite gateway had a 1 MB buffer
    # (667 x 1500 B packets), set by the provider - so 1 MB here, ~11 x the 90 kB BDP, as measured.
    "geo-skyplex": Profile(
        "geo-skyplex", "GEO Skyplex with DAMA/BoD (CRA 44k + RBDC), 1.144 Mbit/s, 600 ms RTT",
        "Caini et al., Analysis of TCP live experiments on a real GEO satellite testbed (sec. 3.3, 4)",
        forward=direction(300, 1_144_000, 1_000_000, bod=SKYPLEX_BOD),
        ret=direction(300, 1_144_000, 1_000_000, bod=SKYPLEX_BOD),
    ),
    # Allman, Hayes, Kruse, Ostermann (seed 000): T1 (1,536,000 bit/s) hardware emulator, 290 ms
    # each way; "queues set above the delay-bandwidth product" -> 128 KiB > BDP (111 kB).
    "geo-acts-t1": Profile(
        "geo-acts-t1", "NASA ACTS / T1 emulator, 1.536 Mbit/s both ways, 290 ms each way",
        "Allman et al., TCP Performance over Satellite Links (sec. 3.2)",
        forward=direction(290, 1_536_000, 131_072),
        ret=direction(290, 1_536_000, 131_072),
    ),
    # A representative consumer Ka-band high-throughput satellite plan (not from a seed paper):
    # 50/5 Mbit/s, 600 ms RTT. Buffers = one BDP per direction (3.75 MB / 375 kB), like a modem
    # sized so one flow can fill the pipe without standing queue.
    "geo-hts": Profile(
        "geo-hts", "GEO high-throughput satellite, 50 Mbit/s forward, 5 Mbit/s return, 600 ms RTT",
        "representative consumer Ka-band HTS service plan; buffer = 1 BDP",
        forward=direction(300, 50_000_000, bdp_bytes(50e6, 600)),
        ret=direction(300, 5_000_000, bdp_bytes(5e6, 600)),
    ),
    # A representative LEO broadband service (not from a seed paper): 100 Mbit/s, 30 ms RTT;
    # buffer = 1 BDP (375 kB).
    "leo": Profile(
        "leo", "LEO broadband, 100 Mbit/s both ways, 30 ms RTT",
        "representative LEO broadband service; buffer = 1 BDP",
        forward=direction(15, 100_000_000, bdp_bytes(100e6, 30)),
        ret=direction(15, 100_000_000, bdp_bytes(100e6, 30)),
    ),
}

DEFAULT_PROFILE = "geo-acts-t1"

# The hub <-> cross terrestrial link: short, fast, so 'cross' is a short-RTT host (Caini et al.
# used 25 ms RTT wired cross traffic over 10 Mbit/s; 10 ms each way at 100 Mbit/s here,
# buffer = 1 BDP = 250 kB).
CROSS_PARAMS: Params = direction(10, 100_000_000, bdp_bytes(100e6, 20))


@dataclass
class Overrides:
    rtt_ms: float | None = None
    fwd_rate: int | None = None
    ret_rate: int | None = None
    ber: float | None = None
    per: float | None = None
    buffer: int | None = None
    jitter_ms: float | None = None
    bod: bool | None = None
    bod_cra: int | None = None
    bod_max: int | None = None
    bod_superframe_ms: float | None = None
    bod_delay_ms: float | None = None
    bod_backlog_ms: float | None = None


def build_link(profile_name: str, ov: Overrides) -> tuple[Params, Params]:
    """(forward, return) parameters: the profile, then each given override."""
    if profile_name not in PROFILES:
        raise ValueError(f"unknown profile {profile_name!r}; one of {', '.join(PROFILES)}")
    prof = PROFILES[profile_name]
    fwd, ret = copy.deepcopy(prof.forward), copy.deepcopy(prof.ret)
    if ov.fwd_rate is not None:
        fwd["rate_bps"] = ov.fwd_rate
    if ov.ret_rate is not None:
        ret["rate_bps"] = ov.ret_rate
    bod_touched = any(v is not None for v in (ov.bod_cra, ov.bod_max, ov.bod_superframe_ms, ov.bod_delay_ms,
                                              ov.bod_backlog_ms))
    for d in (fwd, ret):
        if ov.rtt_ms is not None:
            d["delay_ms"] = ov.rtt_ms / 2
        for key, val in (("ber", ov.ber), ("per", ov.per), ("buffer_bytes", ov.buffer),
                         ("jitter_ms", ov.jitter_ms)):
            if val is not None:
                d[key] = val
        if ov.bod is False:
            d["bod"] = None
        elif ov.bod or (bod_touched and ov.bod is None):
            if d["bod"] is None:
                d["bod"] = dict(SKYPLEX_BOD, rbdc_max_bps=d["rate_bps"])
        if d["bod"] is not None:
            bod = d["bod"]
            for key, bval in (("cra_bps", ov.bod_cra), ("rbdc_max_bps", ov.bod_max),
                              ("superframe_ms", ov.bod_superframe_ms),
                              ("allocation_delay_ms", ov.bod_delay_ms),
                              ("backlog_horizon_ms", ov.bod_backlog_ms)):
                if bval is not None:
                    bod[key] = bval
            # RBDC can never grant more than the carrier.
            bod["rbdc_max_bps"] = min(bod["rbdc_max_bps"], d["rate_bps"])
    return fwd, ret
