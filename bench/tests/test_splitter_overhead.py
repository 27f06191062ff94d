from typing import Any

from bench.scenarios import splitter_overhead as so


def _transfer(rate_gbps: float, busy_s: float = 0.0, cores_s: float = 0.0) -> dict[str, Any]:
    rate_bps = rate_gbps * 1e9 / 8
    return {
        "runs": [{}],
        "rate_Bps": rate_bps,
        "rates_Bps": [rate_bps],
        "bytes": int(rate_bps),
        "endpoint_cpu_s": 0.5,
        "daemon_cpu_s": 0.1,
        "gateway_cores_busy_s": busy_s,
        "gateway_cores_s": cores_s,
    }


def test_headline_variants_are_the_dedicated_placement():
    assert so.transfer_variant("split", "dedicated") == "split"
    assert so.transfer_variant("routed", "shared") == "routed-shared"


def test_ratio_is_split_over_routed_of_the_same_placement():
    t = {
        ("dedicated", "routed"): _transfer(10.0),
        ("dedicated", "split"): _transfer(7.0),
        ("shared", "routed"): _transfer(40.0),
        ("shared", "split"): _transfer(10.0),
    }
    dedicated = so.ratio_record("dedicated", t)
    shared = so.ratio_record("shared", t)
    assert (dedicated.metric, round(dedicated.value, 3)) == (
        "throughput_ratio",
        0.7,
    )
    assert "target >= 0.6" in dedicated.note
    assert (shared.metric, round(shared.value, 3)) == (
        "throughput_ratio_shared",
        0.25,
    )


def test_no_dedicated_placement_is_a_missing_ratio_not_a_number():
    t = {("shared", "routed"): _transfer(40.0), ("shared", "split"): _transfer(10.0)}
    r = so.ratio_record("dedicated", t)
    assert r.value is None and "two CPUs" in r.note


def test_gateway_core_figures_only_where_the_gateway_has_its_own_cpus():
    dedicated = {r.metric: r for r in so.transfer_records("split", "dedicated", _transfer(8.0, 0.3, 1.0))}
    assert round(dedicated["gateway_core_busy"].value, 1) == 30.0
    # 0.3 core-seconds for 8 Gbit moved: 3.75% of a core per Gbit/s.
    assert round(dedicated["gateway_core_cpu"].value, 2) == 3.75
    shared = {r.metric for r in so.transfer_records("split", "shared", _transfer(8.0, 0.3, 1.0))}
    assert "gateway_core_busy" not in shared and "gateway_cpu" in shared
    routed = {r.metric for r in so.transfer_records("routed", "dedicated", _transfer(8.0, 0.01, 1.0))}
    assert "gateway_cpu" not in routed and "gateway_core_cpu" in routed
