"""The control protocol's Python models are generated from the gateway's JSON Schema: the committed modules
must be what the generator makes from the committed schema (which the gateway's own tests hold to its Rust
types), and the initial configs the packages ship must be valid ones."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from perigee_api.schemas.gateway_config import GatewayConfig
from perigee_control import config, reports

ROOT = Path(__file__).resolve().parents[2]
PERIGEE = ROOT / "gateway" / "target" / "release" / "perigee"
SHIPPED = [ROOT / "images" / "gateway" / "gateway.json", ROOT / "debian" / "conf" / "gateway.json"]


def test_generated_models_are_current() -> None:
    p = subprocess.run(
        [sys.executable, str(ROOT / "api" / "tools" / "generate_models.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr + p.stdout


def test_models_follow_the_schema() -> None:
    schema = json.loads((ROOT / "gateway" / "schema" / "config.schema.json").read_text())
    assert set(config.GatewayConfig.model_fields) == {"schema_" if k == "schema" else k for k in schema["properties"]}
    defaults = config.Splitter()
    for name, prop in schema["$defs"]["Splitter"]["properties"].items():
        assert getattr(defaults, name) == prop["default"], name
    report_defs = json.loads((ROOT / "gateway" / "schema" / "reports.schema.json").read_text())["$defs"]
    assert set(reports.Flow.model_fields) == {
        "class_" if k == "class" else k for k in report_defs["Flow"]["properties"]
    }


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_initial_configs_are_valid(path: Path) -> None:
    data = json.loads(path.read_text())
    try:
        GatewayConfig.model_validate(data)
    except ValidationError as exc:
        pytest.fail(f"{path}: {exc}")
    if not PERIGEE.is_file():
        pytest.fail(f"{PERIGEE} is missing: run `make -C gateway build` first")
    p = subprocess.run([str(PERIGEE), "config", "check", str(path)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
