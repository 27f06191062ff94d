"""Pure parts of the paper scenarios: windows, grid cuts, budgets, paper-beside-ours tables."""

from bench import records
from bench.scenarios import allman_ber, bharadwaj_sweep, cc_compare, henderson_fairness
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
        records.measured("henderson-fairness", "e2e/cubic", "geo_throughput", 0.8, "Mbit/s"),
        records.measured("henderson-fairness", "e2e/cubic", "short_throughput", 8.8, "Mbit/s"),
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
    assert lanes.makespan([per_variant] * len(p["variants"]), p["lanes"], SETUP_S) <= 100


def test_allman_doc_shows_the_target_through_perigee_beside_the_paper():
    recs = [
        records.measured("allman-ber", "ber=1e-6/reno", "goodput_pct_optimal", 14.8, "%"),
        records.measured("allman-ber", "ber=1e-6/perigee", "goodput_pct_optimal", 85.9, "%"),
    ]
    text = allman_ber.doc_extra(recs)
    assert "| 1e-6 | 4% | 9% | 14.8% | not run | not run | 85.9% |" in text
    assert "| 1e-5 | – | – | not run | not run | not run | not run |" in text
    assert "85.9%: met" in text
    recs[1] = records.measured("allman-ber", "ber=1e-6/perigee", "goodput_pct_optimal", 70.0, "%")
    assert "70.0%: NOT met" in allman_ber.doc_extra(recs)
    assert "not measured in this run" in allman_ber.doc_extra(recs[:1])


def test_henderson_refuses_runs_that_do_not_measure_their_variant():
    split = {"geo_cc": "cubic", "hub_leg_cc": "hybla"}
    direct = {"geo_cc": "cubic", "hub_leg_cc": ""}
    assert henderson_fairness.run_problem("gateway-hub", "cubic", [split]) is None
    assert henderson_fairness.run_problem("e2e", "cubic", [direct]) is None
    assert "not split" in henderson_fairness.run_problem("gateway-hub", "cubic", [split, direct])
    assert "without a gateway" in henderson_fairness.run_problem("e2e", "cubic", [split])
    assert "ran cubic, not reno" in henderson_fairness.run_problem("e2e", "reno", [direct])


def test_henderson_compares_only_like_with_like():
    assert "drastically" in henderson_fairness.paper_finding("e2e/reno")
    assert "fair share" in henderson_fairness.paper_finding("gateway-hub/cubic")
    assert "not in the thesis" in henderson_fairness.paper_finding("e2e/hybla")


def test_sweep_runs_every_cell_and_cuts_only_the_longest_transfers():
    p = bharadwaj_sweep.PARAMS["full"]
    # 1 MB at 384 kbit/s (21 s on the wire) and 10 MB at 1.536 Mbit/s (52 s) run to the end ...
    assert bharadwaj_sweep.cap_for(1_000_000, 384_000, p) == p["cap_s"]
    assert bharadwaj_sweep.cap_for(10_000_000, 1_536_000, p) < p["max_transfer_s"]
    # ... 10 MB at 384 kbit/s (208 s) and 100 MB anywhere are cut at max_transfer_s
    assert bharadwaj_sweep.cap_for(10_000_000, 384_000, p) == p["max_transfer_s"]
    for rate in p["rates_bps"]:
        assert bharadwaj_sweep.cap_for(100_000_000, rate, p) == p["max_transfer_s"]
    assert 100_000_000 in p["sizes"] and 384_000 in p["rates_bps"]


def test_sweep_labels_and_lab_overrides():
    assert bharadwaj_sweep.variant(1_536_000, 100_000, 1e-7, "split") == "1.536M/100KB/ber=1e-7/split"
    assert bharadwaj_sweep.rate_label(384_000) == "384k"
    ov = bharadwaj_sweep.lab_overrides(8_000_000, 500, 0.0)
    assert ov[ov.index("--buffer") + 1] == str(500_000)  # 1 BDP > 128 KiB
    ov = bharadwaj_sweep.lab_overrides(384_000, 500, 1e-6)
    assert ov[ov.index("--buffer") + 1] == str(128 * 1024)
    assert ov[ov.index("--ber") + 1] == "1e-06"


def test_sweep_doc_tables_per_ber_in_order_with_not_run_cells():
    recs = [
        records.measured(
            "bharadwaj-sweep", "8M/1MB/ber=0/e2e", "throughput", 1946, "kbit/s"
        ),
        records.measured(
            "bharadwaj-sweep", "8M/1MB/ber=0/split", "throughput", 3908, "kbit/s"
        ),
        records.measured(
            "bharadwaj-sweep", "8M/1MB/ber=1e-6/e2e", "throughput", 582, "kbit/s"
        ),
        records.measured(
            "bharadwaj-sweep", "8M/100MB/ber=0/e2e", "throughput", 7100, "kbit/s",
            "66.00 of 100 MB in 75 s cap",
        ),
        records.skipped("bharadwaj-sweep", "8M/100MB/ber=1e-6/e2e", "not run: the lab stopped"),
    ]  # fmt: skip
    text = bharadwaj_sweep.doc_extra(recs)
    assert text.index("ber=0:") < text.index("ber=1e-6:")
    assert "| 8Mbit/s | 1946 → 3908 | 7100* → – |" in text
    assert "| 8Mbit/s | 582 → – | not run |" in text
    assert "still running at its cap" in text


def test_cc_compare_full_fits_its_budget():
    p = cc_compare.PARAMS["full"]
    total = 0.0
    for profile, duration in p["duration_s"].items():
        n_lanes = p["lanes"].get(profile, 1)
        if n_lanes > 1:
            total += lanes.makespan([duration] * len(p["ccs"]), n_lanes, SETUP_S)
        else:  # one lab, the ccs one after another
            total += SETUP_S + duration * len(p["ccs"])
    assert total <= 180


def test_bharadwaj_full_fits_its_budget():
    p = bharadwaj_sweep.PARAMS["full"]
    expected = [
        bharadwaj_sweep.expected_s((rate, ber, mode), p)
        for rate in p["rates_bps"]
        for ber in p["bers"]
        for mode in p["modes"]
    ]
    # every cell, the longest cut at max_transfer_s, within a fifth of the 30-minute bench
    assert lanes.makespan(expected, p["lanes"], SETUP_S) <= 360


def test_sweep_gives_big_files_the_time_their_wire_needs():
    p = bharadwaj_sweep.PARAMS["full"]
    assert bharadwaj_sweep.cap_for(10_000, 384_000, p) == p["cap_s"]
    # 10 MB at 1.536 Mbit/s: 52 s on the wire → 65 s + 3 RTT (below max_transfer_s)
    assert bharadwaj_sweep.cap_for(10_000_000, 1_536_000, p) == 1.25 * 80e6 / 1_536_000 + 1.5
    # a lossy end-to-end flow is expected at its loss-limited rate (1e-6: ~1.2% of packets)
    assert 200e3 < bharadwaj_sweep.loss_ceiling_bps(0.5, 1e-6) < 300e3
    assert bharadwaj_sweep.loss_ceiling_bps(0.5, 0.0) == float("inf")


def test_sweep_doc_says_what_was_left_out():
    recs = [
        records.skipped("bharadwaj-sweep", "384k/10MB/ber=0/e2e", "not run: 208 s on the wire"),
        records.skipped("bharadwaj-sweep", "8M/100MB/ber=0/e2e", "not run: 100 s on the wire"),
        records.skipped("bharadwaj-sweep", "384k/100MB/ber=0/e2e", "not run: 2083 s"),
        records.skipped("bharadwaj-sweep", "8M/1MB/ber=0/split", "lab failed: boom"),
    ]
    text = bharadwaj_sweep.not_run_summary(recs)
    assert "10MB at 384k; 100MB at 384k, 8M" in text
    assert "1MB" not in text
    assert bharadwaj_sweep.not_run_summary([]) == "Every cell of this run's grid ran."


def test_line_grid_draws_every_cell_even_empty_ones(tmp_path):
    from bench import plots

    path = plots.line_grid(
        tmp_path / "grid.png",
        "title",
        "file size [KB]",
        "throughput [kbit/s]",
        ["BER 0", "BER 1e-6"],
        ["384k", "8M"],
        {("BER 0", "8M"): {"e2e": [(10, 80), (1000, 900)], "split": []}},
        {("BER 0", "8M"): [(8000, "link rate"), (131, "paper")]},
    )
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_quick_runs_fit_40_s_each():
    p = allman_ber.PARAMS["quick"]
    names = [*p["ccs"], allman_ber.PERIGEE]
    allman = [allman_ber.expected_s((b, n), p) for b in p["bers"] for n in names]
    assert lanes.makespan(allman, p["lanes"], SETUP_S) <= 40
    p = henderson_fairness.PARAMS["quick"]
    per_variant = [henderson_fairness.expected_s(p)] * len(p["variants"])
    assert lanes.makespan(per_variant, p["lanes"], SETUP_S) <= 40
    p = cc_compare.PARAMS["quick"]
    assert all(p["lanes"].get(prof, 1) >= len(p["ccs"]) for prof in p["profiles"])
    assert sum(p["duration_s"][prof] for prof in p["profiles"]) + SETUP_S <= 40
    p = bharadwaj_sweep.PARAMS["quick"]
    sweep = [
        bharadwaj_sweep.expected_s((rate, ber, mode), p)
        for rate in p["rates_bps"]
        for ber in p["bers"]
        for mode in p["modes"]
    ]
    assert lanes.makespan(sweep, p["lanes"], SETUP_S) <= 40
