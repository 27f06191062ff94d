"""Scenario registry: each module here is one benchmark scenario.

A scenario module defines NAME, KIND, TITLE, DESCRIPTION (Markdown), PARAMS = {"quick": {...},
"full": {...}} and run(ctx, params) -> list[Record]; optionally doc_extra(records) -> Markdown shown
above its generated table (e.g. the paper's numbers beside ours).
"""

from __future__ import annotations

import importlib
from types import ModuleType

MODULES = ("emulator", "cc_compare", "geo_hts_50mb", "allman_ber")
REQUIRED = ("NAME", "KIND", "TITLE", "DESCRIPTION", "PARAMS", "run")


def load_all() -> dict[str, ModuleType]:
    registry: dict[str, ModuleType] = {}
    for mod_name in MODULES:
        mod = importlib.import_module(f"bench.scenarios.{mod_name}")
        missing = [attr for attr in REQUIRED if not hasattr(mod, attr)]
        if missing or set(mod.PARAMS) != {"quick", "full"}:
            raise RuntimeError(
                f"scenario {mod_name} is incomplete: {missing or 'PARAMS needs quick and full'}"
            )
        registry[mod.NAME] = mod
    return registry
