from bench import scenarios
from bench.scenarios import allman_ber


def test_every_scenario_registers_with_quick_and_full_parameters():
    registry = scenarios.load_all()
    assert {"emulator", "cc-compare", "geo-hts-50mb", "allman-ber"} <= set(registry)
    kinds = {mod.KIND for mod in registry.values()}
    assert len(kinds) == len(registry)  # --quick runs one scenario of each kind
    for mod in registry.values():
        assert mod.TITLE and mod.DESCRIPTION
        assert set(mod.PARAMS) == {"quick", "full"}


def test_allman_doc_puts_the_paper_beside_ours():
    from bench import records

    recs = [
        records.measured(
            "allman-ber", "ber=1e-6/reno", "goodput_pct_optimal", 14.3, "%"
        )
    ]
    text = allman_ber.doc_extra(recs)
    assert "| 1e-6 | 4% | 9% | 14.3% | not run | not run |" in text
    assert "| 1e-7 | 22% | 41% | not run | not run | not run |" in text
    assert allman_ber.ber_label(1e-7) == "1e-7" and allman_ber.ber_label(0) == "0"
