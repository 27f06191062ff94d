"""The weather scenario's arithmetic: the limit against a schedule, the overlay drawn on its plots and
the targets' verdicts (no lab)."""

from __future__ import annotations

import pytest

from bench import records
from bench.profiles import figures
from bench.scenarios import loaded_latency, weather
from bench.transfer import Transfer


def _run(schedule: str, profile: str, size: int, offset: float, done_at: float) -> weather.Run:
    from satlab import weather as sw
    from satlab.profiles import PROFILES

    p = PROFILES[profile]
    resolved = sw.resolve(sw.load(schedule), dict(p.forward), dict(p.ret))
    tr = Transfer("cubic", size, size, [(0.0, 0.0), (done_at, float(size))])
    return weather.Run(tr, offset, resolved)


def test_the_limit_integrates_the_schedule_from_the_request() -> None:
    link = figures("geo-hts")
    # 200 MB from 1 s into the rain fade: the request lands at 1.9 s; 8.1 s at 50, 20 s at 20,
    # the rest (1,600 - 405 - 400 Mbit) at 50 Mbit/s; plus 1.5 + 0.5 RTT.
    fade = _run("rain-fade", "geo-hts", 200_000_000, 1.0, 47.4)
    assert weather.limit_s(fade, link) == pytest.approx(0.9 + 8.1 + 20 + 795e6 / 50e6 + 0.3)
    # Without weather the limit is the benchmarks' own: 2 RTT + size / rate.
    clear = _run("rain-fade", "geo-hts", 50_000_000, 40.0, 10.0)
    assert weather.limit_s(clear, link) == pytest.approx(1.2 + 8.0)
    recs = {(r.variant, r.metric): r for r in weather.run_records("k", fade, link, 120)}
    assert recs[("k", "vs_limit")].value == pytest.approx(47.4 / weather.limit_s(fade, link))


def test_the_overlay_draws_the_rate_and_shades_the_loss() -> None:
    link = figures("leo")
    run = _run("leo-pass", "leo", 300_000_000, 1.0, 30.0)
    line, spans = weather.schedule_overlay(run, link, 30.0)
    assert {y for _, y in line} == {100.0}  # the LEO pass keeps the rate
    # Outages at 15 s and 30 s of the schedule: 14 s and 29 s of the transfer (the one at 0 is before it).
    assert [(round(a, 3), round(b, 3)) for a, b, _ in spans] == [(14.0, 14.3), (29.0, 29.3)]
    fade = _run("rain-fade", "geo-hts", 200_000_000, 1.0, 47.4)
    line, spans = weather.schedule_overlay(fade, figures("geo-hts"), 47.4)
    assert (9.0, 20.0) in line and [(a, b) for a, b, _ in spans] == [(9.0, 29.0)]


def _rec(variant: str, metric: str, value: float | None) -> records.Record:
    if value is None:
        return records.missing("weather", variant, metric, "s", "capped")
    return records.measured("weather", variant, metric, value, "s")


def test_verdicts_compare_each_case_with_its_end_to_end_runs() -> None:
    recs = [
        _rec("rain-fade/200MB/both/default/run1", "limit", 45.2),
        _rec("rain-fade/200MB/both/default/run1", "completion", 47.4),
        _rec("rain-fade/200MB/both/default/run1", "vs_limit", 1.05),
        _rec("rain-fade/200MB/e2e/bbr/run1", "completion", 56.1),
        _rec("leo-pass/300MB/both/default/run1", "limit", 24.1),
        _rec("leo-pass/300MB/both/default/run1", "completion", 27.0),
        _rec("leo-pass/300MB/both/default/run1", "vs_limit", 1.12),
        _rec("leo-pass/300MB/e2e/bbr/run1", "completion", 26.4),
    ]
    text = weather.doc_extra(recs)
    assert "rain-fade/200MB: Perigee (defaults) 47.4 s = 1.05x" in text
    assert "fastest end to end 56.1 s: never slower; target <= 1.1x: met" in text
    assert "leo-pass/300MB" in text and "SLOWER" in text  # said, not hidden


def test_loaded_latency_checks_rtt_plus_50_ms() -> None:
    recs = [
        records.measured("loaded-latency", "default", "ping_median", 614.0, "ms"),
        records.measured("loaded-latency", "default", "ping_over_rtt", 14.0, "ms"),
        records.measured("loaded-latency", "former-default", "fetch_median", 700.0, "ms"),
        records.measured("loaded-latency", "former-default", "fetch_over_rtt", 100.0, "ms"),
    ]
    text = loaded_latency.doc_extra(recs)
    assert "default: ping median 614 ms = RTT + 14 ms, target RTT + 50 ms: met" in text
    assert "former-default: fetch median 700 ms = RTT + 100 ms, target RTT + 50 ms: NOT met" in text
