"""Link schedules (satlab.weather): named schedules resolve against the link, relative values, the
emulator's request, and the capacity a schedule offers over time (no namespaces)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from satlab import weather
from satlab.profiles import PROFILES


def _link(name: str) -> tuple[dict, dict]:
    p = PROFILES[name]
    return dict(p.forward), dict(p.ret)


def test_rain_fade_drops_the_forward_rate_to_40_percent_with_ber_for_20_s() -> None:
    fwd, ret = _link("geo-hts")
    r = weather.resolve(weather.load("rain-fade"), fwd, ret)
    assert r["repeat_ms"] is None
    assert r["steps"] == [
        {"at_ms": 10_000, "dir": "forward", "params": {"rate_bps": 20_000_000, "ber": 1e-6}},
        {"at_ms": 30_000, "dir": "forward", "params": {"rate_bps": 50_000_000, "ber": 0.0}},
    ]
    req = weather.emulator_request(r, "b_to_a")
    assert req["cmd"] == "schedule" and {s["dir"] for s in req["steps"]} == {"b_to_a"}


def test_leo_pass_changes_path_every_15_s_with_300_ms_of_heavy_loss() -> None:
    fwd, ret = _link("leo")
    r = weather.resolve(weather.load("leo-pass"), fwd, ret)
    assert r["repeat_ms"] == 60_000
    changes = [s for s in r["steps"] if "delay_ms" in s["params"]]
    assert [s["at_ms"] for s in changes if s["dir"] == "forward"] == [0, 15_000, 30_000, 45_000]
    assert all(s["params"]["per"] >= 0.5 for s in changes)
    ends = [s for s in r["steps"] if s["params"] == {"per": 0.0}]
    assert sorted({s["at_ms"] - 300 for s in ends}) == [0, 15_000, 30_000, 45_000]
    # Both directions lose at a path change.
    assert {s["dir"] for s in changes} == {"forward", "return"}


def test_the_limit_integrates_the_schedule() -> None:
    fwd, ret = _link("geo-hts")
    r = weather.resolve(weather.load("rain-fade"), fwd, ret)
    tl = weather.rate_timeline(r, fwd["rate_bps"], 100)
    assert tl == [(0.0, 50e6), (10.0, 20e6), (30.0, 50e6)]
    # 200 MB from t = 0.9 s: 9.1 s at 50, 20 s at 20, the rest at 50 Mbit/s.
    t = weather.delivery_time_s(tl, 0.9, 200e6 * 8)
    assert t == pytest.approx(9.1 + 20 + (1600e6 - 9.1 * 50e6 - 400e6) / 50e6)
    # Before the fade nothing changes; a repeating schedule repeats its rates.
    assert weather.delivery_time_s(tl, 0, 50e6) == pytest.approx(1.0)
    rep = {"steps": [{"at_ms": 0, "dir": "forward", "params": {"rate_bps": 1}},
                     {"at_ms": 500, "dir": "forward", "params": {"rate_bps": 3}}], "repeat_ms": 1000}
    assert weather.rate_timeline(rep, 2, 2.2) == [(0.0, 2.0), (0.0, 1.0), (0.5, 3.0), (1.0, 1.0), (1.5, 3.0),
                                                  (2.0, 1.0)]


def test_a_schedule_file_and_bad_schedules(tmp_path: Path) -> None:
    fwd, ret = _link("geo-hts")
    f = tmp_path / "storm.json"
    f.write_text(json.dumps({"steps": [{"at_s": 1, "return": {"rate_factor": 0.5, "per": 0.01}}]}))
    r = weather.resolve(weather.load(str(f)), fwd, ret)
    assert r["name"] == "storm"
    assert r["steps"] == [{"at_ms": 1000, "dir": "return", "params": {"rate_bps": 2_500_000, "per": 0.01}}]
    for bad, what in [
        ({"steps": []}, "steps"),
        ({"steps": [{"at_s": "x", "forward": {}}]}, "at_s"),
        ({"steps": [{"at_s": 1, "sideways": {}}]}, "steps[0]"),
        ({"steps": [{"at_s": 1, "forward": {"rate_factor": 0}}]}, "rate_factor"),
        ({"steps": [{"at_s": 1, "forward": {"colour": "base"}}]}, "colour"),
        ({"steps": [{"at_s": 1, "forward": {}}], "weather": 1}, "weather"),
    ]:
        with pytest.raises(weather.ScheduleError, match=re.escape(what)):
            weather.resolve(bad, fwd, ret)
    with pytest.raises(weather.ScheduleError, match="no schedule"):
        weather.load("monsoon")
