"""The bypass entries the gateway owns, read from its schema (the generated models): the built-in IPsec entries
every config carries (`x-builtin` on GatewayConfig.bypass, the gateway's `builtin_bypass()`) and the protocols whose
entries may list ports (`x-protocols` on BypassRule.ports). The API, satlab and the benchmarks use these; none
restates them."""

from __future__ import annotations

from typing import Any

from perigee_control.config import BypassRule, GatewayConfig
from perigee_control.limits import extension

BUILTIN_BYPASS: tuple[BypassRule, ...] = tuple(
    BypassRule.model_validate(r) for r in extension(GatewayConfig, "bypass", "x-builtin")
)
BUILTIN_NAMES: frozenset[str] = frozenset(r.name for r in BUILTIN_BYPASS)
PORT_PROTOCOLS: tuple[str, ...] = tuple(extension(BypassRule, "ports", "x-protocols"))


def builtin_bypass_json() -> list[dict[str, Any]]:
    """The built-in entries as a config's JSON carries them (a fresh copy each call)."""
    return [r.model_dump(mode="json") for r in BUILTIN_BYPASS]
