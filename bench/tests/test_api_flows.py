import json
import subprocess

import pytest

from bench.scenarios import api_flows

SUMMARY = {
    "list_live_flows": {
        "flows": 10000,
        "unfiltered": {
            "p50_ms": 20.0,
            "p99_ms": 41.5,
            "max_ms": 45.0,
            "bytes": 8600000,
        },
        "filtered_action": {
            "p50_ms": 9.0,
            "p99_ms": 12.0,
            "max_ms": 13.0,
            "bytes": 2800000,
        },
    },
    "ingest_closed_flows": {
        "records_per_tick": 1000,
        "tick_p50_ms": 125.0,
        "tick_max_ms": 180.0,
        "sustainable_records_per_s": 8000,
        "stored": 5000,
        "poll_requests": 15,
        "poll_p99_ms": 60.0,
    },
}


def test_summary_is_the_last_line_and_becomes_records():
    out = "list 10000 live flows: {...}\ningest: {...}\n" + json.dumps(SUMMARY) + "\n\n"
    recs = {(r.variant, r.metric): r for r in api_flows.to_records(api_flows.parse_summary(out))}
    assert recs[("list-10000-unfiltered", "latency_p99")].value == 41.5
    assert "target p99 < 50 ms" in recs[("list-10000-unfiltered", "latency_p99")].note
    assert recs[("list-10000-filtered-action", "latency_p50")].value == 9.0
    assert recs[("ingest-1000-per-s", "sustainable_rate")].value == 8000
    assert recs[("ingest-1000-per-s", "dashboard_poll_p99")].unit == "ms"


@pytest.mark.parametrize("text", ["", "ingest: done\n", json.dumps({"other": 1})])
def test_a_summary_that_is_not_there_is_an_error(text):
    with pytest.raises(ValueError):
        api_flows.parse_summary(text)


def test_the_scenario_runs_the_benchmark_module_with_its_parameters(monkeypatch):
    """The argv the scenario hands to procs.run names a module that starts (its --help answers) and passes the
    mode's parameters; the benchmark itself runs in `make bench-quick`."""
    seen: list[list[str]] = []

    def fake_run(argv, timeout, check=True):
        seen.append(argv)
        return subprocess.CompletedProcess(argv, 0, json.dumps(SUMMARY) + "\n", "")

    monkeypatch.setattr(api_flows.procs, "run", fake_run)
    recs = api_flows.run(None, api_flows.PARAMS["quick"])
    assert recs and seen[0][1:3] == ["-m", "bench.api.flows"]
    assert seen[0][3:] == ["--flows", "10000", "--requests", "50", "--ingest-seconds", "5"]
    helped = subprocess.run([*seen[0][:3], "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "--ingest-seconds" in helped.stdout, helped.stderr
