"""Link figures (forward rate, base RTT) of satlab's profiles, read from satlab itself."""

from __future__ import annotations

from dataclasses import dataclass

# Used only when satlab's package cannot be imported; the same numbers as lab/satlab/profiles.py.
_FALLBACK = {
    "geo-acts-t1": (1_536_000, 0.580),
    "geo-hts": (50_000_000, 0.600),
    "geo-skyplex": (1_144_000, 0.600),
    "leo": (100_000_000, 0.030),
}


@dataclass(frozen=True)
class LinkFigures:
    name: str
    forward_bps: float
    rtt_s: float  # propagation only: the two one-way delays


def figures(name: str) -> LinkFigures:
    try:
        from satlab.profiles import PROFILES

        prof = PROFILES[name]
        return LinkFigures(
            name,
            float(prof.forward["rate_bps"]),
            (prof.forward["delay_ms"] + prof.ret["delay_ms"]) / 1000.0,
        )
    except (ImportError, KeyError):
        rate, rtt = _FALLBACK[name]
        return LinkFigures(name, float(rate), rtt)
