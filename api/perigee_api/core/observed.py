"""What the gateway runs, as the API last observed it: the record the app context holds and the collector
keeps fresh (services/running.py makes the observations)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Running:
    """One look at the gateway: what it runs, and which version that is."""

    checked_at: float = 0.0
    reachable: bool = False
    # None: the gateway runs no config (or could not be asked); "" is a config without a revision.
    revision: str | None = None
    config: dict[str, Any] | None = None
    version_id: int | None = None
    imported: bool = False
    error: str | None = None
