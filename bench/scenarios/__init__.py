"""Scenario registry: each module here is one benchmark scenario.

A scenario module defines NAME, KIND, TITLE, DESCRIPTION (Markdown), PARAMS = {"quick": {...},
"full": {...}} and run(ctx, params) -> list[Record]; optionally doc_extra(records) -> Markdown shown
above its generated table (e.g. the paper's numbers beside ours).
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

# Run order for a full bench (cheap and foundational first); a scenario module that is not listed
# still runs, after these, in name order, so adding a scenario is adding one file.
MODULES = (
    "emulator",
    "cc_compare",
    "geo_hts_50mb",
    "splitter_overhead",
    "scale",
    "geo_ber",
    "weather",
    "allman_ber",
    "caini_bod",
    "bod_tuning",
    "henderson_fairness",
    "shared_bottleneck",
    "loaded_latency",
    "bharadwaj_sweep",
    "web_pages",
    "modern_web",
    "peer_path",
    "api_flows",
    "hub_scale",
)


def module_names() -> list[str]:
    present = {m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")}
    return [m for m in MODULES if m in present] + sorted(present - set(MODULES))


REQUIRED = ("NAME", "KIND", "TITLE", "DESCRIPTION", "PARAMS", "run")


def load_all() -> dict[str, ModuleType]:
    registry: dict[str, ModuleType] = {}
    for mod_name in module_names():
        mod = importlib.import_module(f"bench.scenarios.{mod_name}")
        missing = [attr for attr in REQUIRED if not hasattr(mod, attr)]
        if missing or set(mod.PARAMS) != {"quick", "full"}:
            raise RuntimeError(f"scenario {mod_name} is incomplete: {missing or 'PARAMS needs quick and full'}")
        registry[mod.NAME] = mod
    return registry
