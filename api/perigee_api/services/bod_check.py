"""Before a BoD derivation is written into the config: what the config would refuse, and what is outside the link's
physics (the operator confirms those with the consequence spelled out).

- config_problems: the desired config with the derivation written in (the one mapping, perigee_control.bod),
  validated as a whole; any refusal is named here, so "Save and write to config" never half-applies.
- link_risks: rates beyond any satellite carrier or far from the rates the gateway runs with, an RTT no satellite
  path has.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import ValidationError

from perigee_api.core.messages import headline, humanize
from perigee_api.schemas.gateway_config import GatewayConfig
from perigee_api.tuning import BodInputs, Tuning, write_config

# The widest DVB-S2X carriers carry about 5 Gbit/s: a rate above it is a typo or the wrong unit.
CARRIER_MAX_BPS = 5_000_000_000
# A rate this many times above or below the one the gateway runs with is another link, not a tuning of this one.
RATE_FACTOR = 4
# Satellite round trips: LEO from about 20 ms; a GEO hop with its DAMA wait up to about 1.5 s.
RTT_MIN_MS, RTT_MAX_MS = 20, 1600


def _rate(bps: float) -> str:
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:g} {unit}"
    return f"{bps:g} bit/s"


def written(desired: dict[str, Any], inputs: BodInputs, tuning: Tuning) -> tuple[dict[str, Any], list[str]]:
    """The desired config with the derivation written in, and why the gateway's schema would refuse it (none: it
    would be stored)."""
    cfg = copy.deepcopy(desired)
    write_config(cfg, inputs, tuning)
    try:
        GatewayConfig.model_validate(cfg)
    except ValidationError as exc:
        details = humanize(list(exc.errors()))
        return cfg, [headline([d]) for d in details]
    return cfg, []


def link_risks(inputs: BodInputs, running: dict[str, Any] | None) -> list[str]:
    risks = []
    ret = inputs.return_cra_bps + inputs.return_rbdc_max_bps
    for name, bps in (("forward rate", inputs.forward_rate_bps), ("return rate (CRA + RBDC max)", ret)):
        if bps > CARRIER_MAX_BPS:
            risks.append(
                f"a {name} of {_rate(bps)} is beyond any satellite carrier (the widest carry about "
                f"{_rate(CARRIER_MAX_BPS)}): buffers, pacing and the shaper would be sized for a link that does not "
                "exist and the real link's queue would overflow"
            )
    sat = (running or {}).get("satellite") or {}
    for name, bps, key in (
        ("forward", inputs.forward_rate_bps, "forward_rate_bps"),
        ("return", ret, "return_rate_bps"),
    ):
        now = float(sat.get(key) or 0)
        if now > 0 and bps > 0 and (bps / now > RATE_FACTOR or now / bps > RATE_FACTOR):
            risks.append(
                f"the {name} rate {_rate(bps)} is {bps / now:.3g}× the {_rate(now)} the gateway runs with: "
                "check the unit, or that this is the same link"
            )
    if inputs.base_rtt_ms < RTT_MIN_MS:
        risks.append(
            f"a base RTT of {inputs.base_rtt_ms:g} ms is shorter than any satellite path (LEO round trips start "
            f"near {RTT_MIN_MS} ms): Hybla would not speed up the window at all"
        )
    elif inputs.base_rtt_ms > RTT_MAX_MS:
        risks.append(
            f"a base RTT of {inputs.base_rtt_ms:g} ms is longer than a geostationary hop with its DAMA wait (up to "
            f"about {RTT_MAX_MS} ms): Hybla would grow windows far faster than the link drains them"
        )
    return risks
