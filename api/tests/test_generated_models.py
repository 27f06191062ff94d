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

from perigee_api import loss_tuning
from perigee_api.schemas.gateway_config import GatewayConfig
from perigee_control import config, limits, reports

ROOT = Path(__file__).resolve().parents[2]
PERIGEE = ROOT / "gateway" / "target" / "release" / "perigee"
# The boot config the Debian package and the gateway image ship (one file: images/gateway/Dockerfile copies it).
SHIPPED = [ROOT / "debian" / "conf" / "gateway.json"]


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


# Bounds JSON Schema cannot say, in keywords of the gateway's schema (its Rust limits): field → keyword.
EXTENSIONS = {
    ("Shaping", "rate_bps"): "x-minimum-nonzero",
    ("Cache", "disk_mb"): "x-maximum-rock",
    ("Satellite", "congestion_control"): "x-short-path-rtt-ms",
}


@pytest.mark.parametrize(("where", "keyword"), EXTENSIONS.items(), ids=[k for k in EXTENSIONS.values()])
def test_bounds_beyond_json_schema_are_read_from_the_gateways_schema(where: tuple[str, str], keyword: str) -> None:
    schema = json.loads((ROOT / "gateway" / "schema" / "config.schema.json").read_text())
    model, field = where
    emitted = schema["$defs"][model]["properties"][field][keyword]
    assert limits.extension(getattr(config, model), field, keyword) == emitted


def test_the_rules_enforce_the_schemas_numbers() -> None:
    lowest = limits.extension(config.Shaping, "rate_bps", "x-minimum-nonzero")
    config.Shaping(enabled=True, rate_bps=lowest)
    config.Shaping(rate_bps=0)
    with pytest.raises(ValidationError, match=f"at least {lowest} bit/s"):
        config.Shaping(enabled=True, rate_bps=lowest - 1)
    rock = limits.extension(config.Cache, "disk_mb", "x-maximum-rock")
    config.Cache(store="rock", disk_mb=rock)
    config.Cache(store="aufs", disk_mb=rock + 1)
    with pytest.raises(ValidationError, match=f"at most {rock} for store rock"):
        config.Cache(store="rock", disk_mb=rock + 1)


def test_the_bod_choice_follows_the_gateway_on_a_short_path() -> None:
    # The BoD page names what the gateway does: below the gateway's short-path RTT its default leg keeps the
    # default, whose rho there is the schema's floor.
    short = limits.extension(config.Satellite, "congestion_control", "x-short-path-rtt-ms")
    rho_min = limits.extension(config.Satellite, "congestion_control", "x-ld-rho-min")
    default_cc = limits.default(config.Satellite, "congestion_control")
    below = loss_tuning.choose(0.0, 1e9, 10, 0.0, short - 1, dama=False)
    assert below.value == default_cc and f"rho {rho_min} " in below.derivation
    assert loss_tuning.choose(0.0, 1e9, 10, 0.0, short, dama=False).value == default_cc
    assert limits.default(config.Hybla, "rtt0_ms") == loss_tuning.RTT0_MS


def test_no_restated_gateway_limits_in_the_rules() -> None:
    # The numbers of the gateway's limits live in its schema only: none is written into the rules again.
    text = (ROOT / "control" / "perigee_control" / "rules.py").read_text()
    for name in ("MIN_SHAPING_BPS =", "MAX_ROCK_MB =", "8_000", "262_144", '"other"'):
        assert name not in text, name
