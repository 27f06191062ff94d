"""Overhead and scale scenario helpers: load splitting, /proc parsing, metric math, and the Rust
load generator driven through gwload on loopback."""

import socket

import pytest

from bench import procs
from bench.tools import connload, gwload, gwproc


def test_split_evenly_spreads_the_remainder_over_the_first_parts():
    assert connload.split_evenly(10_000, 4) == [2500, 2500, 2500, 2500]
    assert connload.split_evenly(10, 3) == [4, 3, 3]
    assert sum(connload.split_evenly(9_999, 7)) == 9_999


def test_loadgen_missing_fails_clearly(monkeypatch, tmp_path):
    # No Python fallback: a rate measured with the slow client would be its own ceiling.
    monkeypatch.setattr(gwload, "LOADGEN", tmp_path / "perigee-loadgen")
    with pytest.raises(procs.ToolError, match="make build"):
        gwload.loadgen_argv("rate")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_conn_rate_with_the_built_loadgen_on_loopback():
    def here(role: str, argv: list[str]) -> list[str]:
        return argv

    port = _free_port()
    with gwload.echo_server(here, "127.0.0.1", 2, port=port):
        r = gwload.conn_rate(here, "127.0.0.1", 2, 8, 0.3, 300, port=port)
    assert r["errors"] == 0, r
    assert r["completed"] == 300 and r["unfinished"] == 0
    assert 0 < r["completed_in_window"] <= 300
    assert r["rate_per_s"] == pytest.approx(r["completed_in_window"] / 0.3)
    assert 0 < r["latency_p50_us"] <= r["latency_p99_us"]


def test_bytes_per_flow_from_rss_growth():
    assert gwload.bytes_per_flow(10_000, 22_500, 10_000) == 1280.0
    assert gwload.bytes_per_flow(10_000, 9_000, 100) == 0.0  # RSS shrank: no growth, not negative
    with pytest.raises(ValueError):
        gwload.bytes_per_flow(1, 2, 0)


def test_cpu_per_gbps_is_core_seconds_per_gbit():
    # 1 core-second spent moving 1.25 GB (10 Gbit): 10 % of a core per Gbit/s, whatever the duration
    assert gwload.cpu_per_gbps(1.0, 1_250_000_000) == pytest.approx(10.0)
    with pytest.raises(ValueError):
        gwload.cpu_per_gbps(1.0, 0)


def test_classify_cmdline_tells_master_from_worker():
    exe = b"/work/main/gateway/target/release/perigee"
    assert gwproc.classify_cmdline(exe + b"\0gateway\0run\0--config\0x.json\0") == "master"
    assert gwproc.classify_cmdline(exe + b"\0gateway\0worker\0--index\0" + b"2\0") == "worker"
    assert gwproc.classify_cmdline(exe + b"\0flows\0--json\0") is None
    assert gwproc.classify_cmdline(b"/usr/bin/python3\0-m\0gateway\0run\0") is None
    assert gwproc.classify_cmdline(b"") is None


def test_parse_status_reads_rss_and_peak():
    text = "Name:\tperigee\nVmPeak:\t  99999 kB\nVmHWM:\t   8200 kB\nVmRSS:\t   7100 kB\nThreads:\t2\n"
    assert gwproc.parse_status_kib(text) == {"VmHWM": 8200, "VmRSS": 7100}
    assert gwproc.parse_status_kib("Name:\tkthreadd\n") == {}


def test_scale_conn_rate_note_says_lower_bound_only_when_capped():
    from bench.scenarios import scale

    # 10,000 in 2 s: the cap, not the gateway, set the old 5,000/s.
    assert scale.conn_rate_note({"capped": True}, 10_000, True) == (
        "through the emulator and the hub's splitter (its own rate: splitter-overhead)"
        "; lower bound: the run hit rate_max_conns (10,000)"
    )
    assert scale.conn_rate_note({"capped": False}, 60_000, False) == ("through the emulator only: the baseline")
    assert "lower bound" not in scale.conn_rate_note({}, 60_000, True)
    # The caps leave room above the target: at least 3x it over each window.
    for p in scale.PARAMS.values():
        assert p["rate_max_conns"] / p["rate_duration_s"] >= 3 * 5000
