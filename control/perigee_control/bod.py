"""Where BoD tuning lands in the gateway's config: the one mapping from a derivation's values to config fields.

The API's "write to config" (perigee_api/api/routes/bod.py) and the benchmark's tuned gateways
(bench/tools/gwconfig.py) both write through `write_tuning`, so what is measured is what an operator gets. The
daemon's untuned values are the generated models' defaults (the gateway's schema), never restated here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from perigee_control.config import Hybla, Satellite, Shaping

# Derived value -> (config section, field), written as whole numbers.
TUNED_FIELDS: dict[str, tuple[str, str]] = {
    "sndbuf_bytes": ("satellite", "sndbuf_bytes"),
    "rcvbuf_bytes": ("satellite", "rcvbuf_bytes"),
    "pacing_rate_bps": ("satellite", "pacing_rate_bps"),
    "initcwnd": ("satellite", "initcwnd"),
    "initrwnd": ("satellite", "initrwnd"),
    "hybla_base_rtt_ms": ("hybla", "base_rtt_ms"),
    "hybla_cwnd_max": ("hybla", "cwnd_max"),
    "shaping_rate_bps": ("shaping", "rate_bps"),
    "shaping_overhead_bytes": ("shaping", "overhead_bytes"),
}
_MODELS: dict[str, type[BaseModel]] = {"satellite": Satellite, "hybla": Hybla, "shaping": Shaping}


def write_tuning(
    cfg: dict[str, Any],
    *,
    congestion_control: str,
    values: Mapping[str, float],
    forward_rate_bps: int,
    return_rate_bps: int,
) -> None:
    """Writes a derivation into `cfg` (a config's JSON, changed in place). Shaping is on when its rate is above 0;
    its queue is not a property of the link, so whatever the config has stays. The link's rates go in too: the
    gateway's metrics and the dashboard measure utilisation against them."""
    for key, (section, field) in TUNED_FIELDS.items():
        if key in values:
            cfg.setdefault(section, {})[field] = int(values[key])
    sat = cfg.setdefault("satellite", {})
    sat["congestion_control"] = congestion_control
    sat["forward_rate_bps"] = int(forward_rate_bps)
    sat["return_rate_bps"] = int(return_rate_bps)
    if "shaping_rate_bps" in values:
        cfg["shaping"]["enabled"] = cfg["shaping"]["rate_bps"] > 0


def untuned_settings() -> dict[str, dict[str, Any]]:
    """The daemon's own values of every field BoD tuning sets (the schema's defaults)."""
    out: dict[str, dict[str, Any]] = {}
    for section, field in TUNED_FIELDS.values():
        out.setdefault(section, {})[field] = _MODELS[section].model_fields[field].default
    out["shaping"]["enabled"] = Shaping.model_fields["enabled"].default
    return out


def tuned_settings(cfg: Mapping[str, Any]) -> dict[str, int]:
    """The tuned fields of a config, flat ("satellite.sndbuf_bytes"), for records and logs."""
    return {f"{s}.{f}": int((cfg.get(s) or {}).get(f, 0)) for s, f in TUNED_FIELDS.values()}
