from bench import run, scenarios
from bench.scenarios import allman_ber


def test_every_scenario_registers_with_quick_and_full_parameters():
    registry = scenarios.load_all()
    assert {"emulator", "cc-compare", "geo-hts-50mb", "allman-ber"} <= set(registry)
    assert {
        "splitter-overhead",
        "scale",
        "caini-bod",
        "bod-tuning",
        "henderson-fairness",
        "bharadwaj-sweep",
        "web-pages",
        "api-flows",
    } <= set(registry)
    for mod in registry.values():
        assert mod.TITLE and mod.DESCRIPTION
        assert set(mod.PARAMS) == {"quick", "full"}


def test_allman_doc_puts_the_paper_beside_ours():
    from bench import records

    recs = [records.measured("allman-ber", "ber=1e-6/reno", "goodput_pct_optimal", 14.3, "%")]
    text = allman_ber.doc_extra(recs)
    assert "| 1e-6 | 4% | 9% | 14.3% | not run | not run |" in text
    assert "| 1e-7 | 22% | 41% | not run | not run | not run |" in text
    assert allman_ber.ber_label(1e-7) == "1e-7" and allman_ber.ber_label(0) == "0"


def test_quick_runs_the_first_scenario_of_each_kind_in_run_order():
    registry = scenarios.load_all()
    quick = run.one_of_each_kind(registry)
    kinds = [registry[name].KIND for name in quick]
    assert len(kinds) == len(set(kinds)) == len({m.KIND for m in registry.values()})
    # the foundational ones come first, and a kind's later scenarios run only in full
    assert quick[:3] == ["emulator", "cc-compare", "geo-hts-50mb"]
    assert "bharadwaj-sweep" not in quick and "scale" not in quick
    assert "bod-tuning" not in quick and "caini-bod" in quick
