"""Pure parts of the paper scenarios: windows, grid cuts, budgets, paper-beside-ours tables."""

from bench import records
from bench.scenarios import allman_ber, henderson_fairness
from bench.tools import lanes


def test_window_rate_counts_only_bytes_inside_the_window():
    samples = [
        (10.0, 0.0),
        (11.0, 1_000_000.0),
        (12.0, 2_000_000.0),
        (13.0, 2_500_000.0),
    ]
    # 11 → 13 s: 1.5 MB in 2 s = 6 Mbit/s
    assert henderson_fairness.window_rate_bps(samples, 11.0, 13.0) == 6_000_000
    assert henderson_fairness.window_rate_bps(samples, 13.0, 11.0) == 0.0


def test_short_flow_runs_cubic_against_hybla_and_the_same_cc_otherwise():
    assert henderson_fairness.short_cc("hybla") == "cubic"
    assert henderson_fairness.short_cc("reno") == "reno"


def test_henderson_doc_puts_the_finding_beside_ours():
    recs = [
        records.measured(
            "henderson-fairness", "e2e/cubic", "geo_throughput", 0.8, "Mbit/s"
        ),
        records.measured(
            "henderson-fairness", "e2e/cubic", "short_throughput", 8.8, "Mbit/s"
        ),
        records.measured("henderson-fairness", "e2e/cubic", "geo_share", 8.3, "%"),
        records.measured("henderson-fairness", "e2e/cubic", "jain_index", 0.59, ""),
    ]
    text = henderson_fairness.doc_extra(recs)
    assert "| e2e/cubic | GEO flow drastically reduced" in text
    assert "| 0.80 Mbit/s | 8.80 Mbit/s | 8% | 0.590 |" in text


# satlab up + sysctls + down per lab: ~7 s measured with four labs starting at once on 2 cores.
SETUP_S = 7.0


def test_allman_full_fits_its_budget():
    p = allman_ber.PARAMS["full"]
    names = [*p["ccs"], allman_ber.PERIGEE]
    expected = [allman_ber.expected_s((b, n), p) for b in p["bers"] for n in names]
    assert lanes.makespan(expected, p["lanes"], SETUP_S) <= 200


def test_henderson_full_fits_its_budget():
    p = henderson_fairness.PARAMS["full"]
    per_variant = henderson_fairness.expected_s(p)
    assert (
        lanes.makespan([per_variant] * len(p["variants"]), p["lanes"], SETUP_S) <= 100
    )


def test_allman_doc_shows_the_target_through_perigee_beside_the_paper():
    recs = [
        records.measured(
            "allman-ber", "ber=1e-6/reno", "goodput_pct_optimal", 14.8, "%"
        ),
        records.measured(
            "allman-ber", "ber=1e-6/perigee", "goodput_pct_optimal", 85.9, "%"
        ),
    ]
    text = allman_ber.doc_extra(recs)
    assert "| 1e-6 | 4% | 9% | 14.8% | not run | not run | 85.9% |" in text
    assert "| 1e-5 | – | – | not run | not run | not run | not run |" in text
    assert "85.9%: met" in text
    recs[1] = records.measured(
        "allman-ber", "ber=1e-6/perigee", "goodput_pct_optimal", 70.0, "%"
    )
    assert "70.0%: NOT met" in allman_ber.doc_extra(recs)
    assert "not measured in this run" in allman_ber.doc_extra(recs[:1])


def test_henderson_refuses_runs_that_do_not_measure_their_variant():
    split = {"geo_cc": "cubic", "hub_leg_cc": "hybla"}
    direct = {"geo_cc": "cubic", "hub_leg_cc": ""}
    assert henderson_fairness.run_problem("gateway-hub", "cubic", [split]) is None
    assert henderson_fairness.run_problem("e2e", "cubic", [direct]) is None
    assert "not split" in henderson_fairness.run_problem(
        "gateway-hub", "cubic", [split, direct]
    )
    assert "without a gateway" in henderson_fairness.run_problem(
        "e2e", "cubic", [split]
    )
    assert "ran cubic, not reno" in henderson_fairness.run_problem(
        "e2e", "reno", [direct]
    )


def test_henderson_compares_only_like_with_like():
    assert "drastically" in henderson_fairness.paper_finding("e2e/reno")
    assert "fair share" in henderson_fairness.paper_finding("gateway-hub/cubic")
    assert "not in the thesis" in henderson_fairness.paper_finding("e2e/hybla")
