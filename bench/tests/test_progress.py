"""`make bench`'s progress line: scenario k of N and the time left from the last results' wall times."""

from __future__ import annotations

from bench import records
from bench.run import last_wall_times, progress_line, time_left


def test_last_wall_times_come_from_the_harness_records() -> None:
    latest = [
        records.measured("emulator", "harness", "scenario_wall_time", 42.0, "s"),
        records.measured("emulator", "leo", "achieved_rate", 99.0, "Mbit/s"),
        records.measured("scale", "harness", "scenario_wall_time", 18.0, "s"),
    ]
    assert last_wall_times(latest) == {"emulator": 42.0, "scale": 18.0}


def test_time_left_sums_last_wall_times_and_falls_back_to_this_runs_mean() -> None:
    last = {"a": 60.0, "b": 120.0}
    assert time_left(["a", "b"], last, []) == 180.0
    # "c" never ran before: the mean of what ran so far stands in for it.
    assert time_left(["b", "c"], last, [30.0, 90.0]) == 180.0
    assert time_left(["c"], last, []) is None
    assert time_left([], last, []) == 0.0


def test_progress_line_names_the_position_and_the_estimate() -> None:
    assert progress_line(3, 12, "web-pages", 750.0) == "scenario 3 of 12: web-pages (about 12 min left)"
    assert progress_line(1, 1, "scale", 5.0) == "scenario 1 of 1: scale (about 1 min left)"
    assert progress_line(1, 2, "new", None) == "scenario 1 of 2: new (time left unknown: no earlier wall time)"
