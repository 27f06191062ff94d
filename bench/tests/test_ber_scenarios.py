"""The pure parts of geo-ber and shared-bottleneck: gateway classes (valid for the API's own
config model), conditions, scoring, verdicts and the standing-queue measure."""

from __future__ import annotations

import pytest

from bench import records, run, scenarios
from bench.profiles import figures
from bench.scenarios import geo_ber, shared_bottleneck
from bench.tools import gwconfig
from bench.transfer import Transfer
from perigee_api.schemas.gateway_config import GatewayConfig


def gateway_config_model() -> type[GatewayConfig]:
    return GatewayConfig


def lab_config(role: str) -> dict:  # type: ignore[type-arg]
    from satlab.gateway import default_config

    cfg: dict = default_config(role)  # type: ignore[type-arg]
    return cfg


@pytest.mark.parametrize("role", ["hub", "terminal"])
def test_geo_ber_classes_are_a_valid_gateway_config(role: str) -> None:
    cfg = lab_config(role)
    cfg["classes"] = geo_ber.gateway_classes(role, 15_000_000)
    gateway_config_model().model_validate(cfg)
    by_port = {c["match"]["dports"][0]: c for c in cfg["classes"]}
    hub_only = by_port[str(geo_ber.VARIANTS["hub/hybla"].port)]
    assert hub_only["action"] == ("bypass" if role == "terminal" else "accelerate")
    ld = by_port[str(geo_ber.VARIANTS["both/hybla_ld"].port)]
    assert ld["satellite"]["buffer_bytes"] == 15_000_000
    assert ld["satellite"]["congestion_control"] == ("hybla_ld" if role == "hub" else None)
    # the former default keeps the lab's buffers; the default names nothing at all
    assert by_port[str(geo_ber.VARIANTS["both/hybla"].port)]["satellite"]["buffer_bytes"] == 0
    default = by_port[str(geo_ber.VARIANTS["both/default"].port)]["satellite"]
    assert default["congestion_control"] is None and default["buffer_bytes"] == 0


@pytest.mark.parametrize("role", ["hub", "terminal"])
def test_shared_bottleneck_classes_are_a_valid_gateway_config(role: str, monkeypatch: pytest.MonkeyPatch) -> None:
    put: list[dict] = []  # type: ignore[type-arg]
    monkeypatch.setattr(
        gwconfig,
        "get_config",
        lambda sock: lab_config("hub" if sock.endswith("hub.sock") else "terminal"),
    )
    monkeypatch.setattr(gwconfig, "put_config", lambda sock, cfg: put.append(cfg))

    class FakeLab:
        prefix = "t-"

    shared_bottleneck.configure(FakeLab(), ["hybla_ld", "hybla"])  # type: ignore[arg-type]
    cfg = next(c for c in put if c["role"] == role)
    gateway_config_model().model_validate(cfg)
    assert cfg["shaping"] == {"enabled": False}
    ccs = [c["satellite"]["congestion_control"] for c in cfg["classes"]]
    assert ccs == (["hybla_ld", "hybla"] if role == "hub" else [None, None])
    put.clear()
    shared_bottleneck.configure(FakeLab(), ["hybla_ld", shared_bottleneck.E2E])  # type: ignore[arg-type]
    cfg = next(c for c in put if c["role"] == role)
    gateway_config_model().model_validate(cfg)
    assert [c["action"] for c in cfg["classes"]] == ["accelerate", "bypass"]


def test_conditions_set_a_ber_or_burst_loss() -> None:
    assert geo_ber.condition_args("1e-6") == ["--ber", "1e-6", "--gilbert", "off"]
    assert geo_ber.condition_args("ge") == ["--ber", "0", "--gilbert", geo_ber.GE_BURST]
    assert geo_ber.variant_key("ge", 5_000_000, "both/bbr") == "ge/5MB/both/bbr"


def transfer(size: int, done_at: float | None, got: int | None = None) -> Transfer:
    end = done_at if done_at is not None else 15.0
    received = size if done_at is not None else int(got or 0)
    return Transfer("hybla_ld", size, received, [(0.0, 0.0), (end, float(received))])


def test_percent_of_optimal_for_finished_and_capped_transfers() -> None:
    link = figures("geo-hts")
    limit = geo_ber.limit_s(50_000_000, link)
    assert limit == pytest.approx(9.2)
    assert geo_ber.pct_optimal(transfer(50_000_000, 18.4), link) == pytest.approx(50.0)
    # capped at 15 s with 25 MB: goodput 13.33 Mbit/s against the optimal 43.48 Mbit/s
    capped = transfer(50_000_000, None, 25_000_000)
    assert geo_ber.pct_optimal(capped, link) == pytest.approx(100 * 25e6 * 8 / 15 / (50e6 * 8 / 9.2))
    recs = geo_ber.transfer_records("1e-6/50MB/e2e/bbr", capped, link, 15)
    by = {r.metric: r for r in recs}
    assert by["completion"].value is None and "25.0 of 50 MB" in by["completion"].note
    assert by["vs_limit"].value is None and "> 1.63x" in by["vs_limit"].note


def rec(variant: str, metric: str, value: float | None) -> records.Record:
    if value is None:
        return records.missing("geo-ber", variant, metric, "x", "capped")
    return records.measured("geo-ber", variant, metric, value, "%" if metric == "pct_optimal" else "x")


def test_verdicts_and_table() -> None:
    recs = [
        rec("1e-6/50MB/both/default", "vs_limit", 1.12),
        rec("1e-6/50MB/both/default", "pct_optimal", 89.0),
        rec("1e-6/50MB/e2e/bbr", "vs_limit", None),
        rec("1e-6/50MB/e2e/bbr", "pct_optimal", 21.0),
        rec("1e-5/50MB/both/default", "vs_limit", None),
        rec("1e-5/50MB/both/default", "pct_optimal", 30.0),
        rec("0/50MB/both/hybla", "vs_limit", 1.07),
        rec("0/50MB/both/hybla", "pct_optimal", 93.0),
        rec("0/50MB/both/default", "vs_limit", 1.04),
        rec("0/50MB/both/default", "pct_optimal", 96.0),
        rec("0/50MB/e2e/bbr", "vs_limit", 1.2),
        rec("0/50MB/e2e/bbr", "pct_optimal", 97.0),
    ]
    text = geo_ber.doc_extra(recs)
    assert "BER 1e-6, 50 MB, both/default: 1.12x the limit, target <= 1.3x: met" in text
    assert "no loss, 50 MB, both/default: 1.04x the limit, target <= 1.05x: met" in text
    assert "BER 1e-5, 50 MB, both/default: capped (30%) the limit, target <= 2x: NOT met" in text
    assert "slower at 0/50MB" in text  # 96% < 97%: said, not hidden
    assert "| BER 1e-6 | 50MB | hybla_ld | 1.12x (89%) | capped (21%) |" in text
    assert "| BER 0 | 50MB | hybla_ld |" in text  # the BoD page names what the gateway runs


def test_standing_queue_is_the_floor_that_did_not_drain() -> None:
    # A sawtooth that drains to 0 every 2 s: nothing stood through a 3 s window.
    saw = [(t / 10, 900.0 * ((t % 20) / 20)) for t in range(300)]
    assert shared_bottleneck.standing_queue(saw, 3.0) == 0.0
    # A queue that never goes under 1.9 s.
    full = [(t / 10, 1900.0 + (t % 3)) for t in range(300)]
    assert shared_bottleneck.standing_queue(full, 3.0) == 1900.0
    assert shared_bottleneck.standing_queue([], 3.0) == 0.0


def test_shared_bottleneck_doc_checks_the_targets() -> None:
    v = "hybla_ld+hybla_ld"
    recs = [
        records.measured("shared-bottleneck", v, "jain_index", 0.99, ""),
        records.measured("shared-bottleneck", v, "standing_queue", 120.0, "ms"),
        records.measured("shared-bottleneck", "hybla+hybla", "jain_index", 1.0, ""),
        records.measured("shared-bottleneck", "hybla+hybla", "standing_queue", 1900.0, "ms"),
    ]
    text = shared_bottleneck.doc_extra(recs)
    assert "Jain 0.990 (target >= 0.95: met), standing queue 120 ms" in text
    assert "| hybla+hybla | n/a | n/a | 1.000 |" in text


def test_bench_quick_runs_geo_ber_for_the_bit_error_kind() -> None:
    registry = scenarios.load_all()
    quick = run.one_of_each_kind(registry)
    assert "geo-ber" in quick and "allman-ber" not in quick
    assert "shared-bottleneck" not in quick and "henderson-fairness" in quick
