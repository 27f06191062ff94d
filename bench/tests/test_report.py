from bench import records, report


def sample_records():
    return [
        records.measured("cc", "geo-hts/cubic", "t90", 4.25, "s"),
        records.measured("cc", "geo-hts/cubic", "goodput", 47.1, "Mbit/s"),
        records.missing("cc", "geo-hts/reno", "t90", "s", "not reached in 15 s"),
        records.measured("cc", "geo-hts/reno", "goodput", 12345.6, "Mbit/s"),
        records.skipped("cc", "geo-hts/hybla", "no hybla | here"),
        records.measured("cc", "geo-hts/cubic", "t90", 7.08, "RTT"),
    ]


def test_table_has_one_row_per_variant_and_one_column_per_metric():
    table = report.scenario_table(sample_records())
    lines = table.splitlines()
    assert lines[0] == "| variant | t90 [s] | goodput [Mbit/s] | t90 [RTT] |"
    assert lines[1] == "|---|---|---|---|"
    assert lines[2] == "| geo-hts/cubic | 4.25 | 47.10 | 7.08 |"
    assert lines[3] == "| geo-hts/reno | n/a (not reached in 15 s) | 12,346 |  |"
    assert "- skipped `geo-hts/hybla`: no hybla | here" in table


def test_format_value_significant_digits():
    assert report.format_value(0.000123456) == "0.000123"
    assert report.format_value(0) == "0"
    assert report.format_value(150.04) == "150.0"
    assert report.format_value(None) == "n/a"


def test_splice_replaces_only_the_generated_part():
    doc = f"# Benchmarks\nintro\n\n{report.BEGIN}\nold table\n{report.END}\n\n## Targets\nkept\n"
    section = report.generated_section(sample_records(), "note", {"cc": ["plots/cc-x.png"]})
    out = report.splice(doc, section)
    assert out.startswith("# Benchmarks\nintro\n\n" + report.BEGIN)
    assert "old table" not in out
    assert out.endswith(report.END + "\n\n## Targets\nkept\n")
    assert "![cc](plots/cc-x.png)" in out
    assert report.splice(out, section) == out  # idempotent


def test_splice_appends_when_markers_are_missing():
    out = report.splice("# Benchmarks\nhand written\n", f"{report.BEGIN}\nx\n{report.END}")
    assert out == f"# Benchmarks\nhand written\n\n{report.BEGIN}\nx\n{report.END}\n"


def test_harness_records_go_under_the_table():
    recs = [
        records.measured("cc", "a", "m", 1, "s"),
        records.measured("cc", "harness", "scenario_wall_time", 65, "s"),
    ]
    section = report.generated_section(recs, "note", {})
    assert "| harness |" not in section
    assert "_scenario wall time: 65.00 s_" in section
