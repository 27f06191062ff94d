"""The committed api/openapi.json (the dashboard's client is generated from it) must be current."""

from __future__ import annotations

import json
from pathlib import Path

from perigee_api.export_openapi import render

COMMITTED = Path(__file__).resolve().parents[1] / "openapi.json"


def test_committed_openapi_is_current() -> None:
    fresh = render()
    assert COMMITTED.exists(), "api/openapi.json missing: run `make -C api openapi`"
    assert COMMITTED.read_text() == fresh, "api/openapi.json is stale: run `make -C api openapi` and commit it"


def test_routes_are_versioned() -> None:
    paths = json.loads(render())["paths"]
    assert paths and all(p.startswith("/api/v1/") for p in paths)
