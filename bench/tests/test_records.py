import json

import pytest

from bench import records
from bench.run import merge_latest


def test_measured_record_round_trips_through_json():
    rec = records.measured("cc-compare", "geo-hts/cubic", "t90", 4.2, "s")
    data = json.loads(json.dumps(rec.to_json()))
    assert data == {
        "scenario": "cc-compare",
        "variant": "geo-hts/cubic",
        "metric": "t90",
        "value": 4.2,
        "unit": "s",
    }
    assert records.from_json(data) == rec


def test_skipped_record_has_no_value_and_a_reason():
    rec = records.skipped("geo-hts-50mb", "gateway-hub/cubic", "gateway not built")
    assert rec.to_json() == {
        "scenario": "geo-hts-50mb",
        "variant": "gateway-hub/cubic",
        "metric": "skipped",
        "value": None,
        "unit": "",
        "note": "gateway not built",
    }


@pytest.mark.parametrize(
    "bad",
    [
        {"scenario": "s", "variant": "v", "metric": "m", "value": 1.0},  # no unit
        {"scenario": "", "variant": "v", "metric": "m", "value": 1.0, "unit": "s"},
        {"scenario": "s", "variant": "v", "metric": "m", "value": "1.0", "unit": "s"},
        {"scenario": "s", "variant": "v", "metric": "m", "value": True, "unit": "s"},
        {
            "scenario": "s",
            "variant": "v",
            "metric": "m",
            "value": None,
            "unit": "s",
        },  # null without a note
        {
            "scenario": "s",
            "variant": "v",
            "metric": "skipped",
            "value": 3,
            "unit": "",
            "note": "x",
        },
        {
            "scenario": "s",
            "variant": "v",
            "metric": "m",
            "value": 1,
            "unit": "s",
            "extra": 1,
        },
    ],
)
def test_schema_violations_are_rejected(bad):
    with pytest.raises(records.RecordError):
        records.from_json(bad)


def test_non_finite_values_are_rejected():
    with pytest.raises(records.RecordError):
        records.measured("s", "v", "m", float("nan"), "s")


def test_latest_must_be_a_list():
    with pytest.raises(records.RecordError):
        records.load_list({"scenario": "s"})


def test_merge_keeps_scenarios_that_did_not_run():
    old = [
        records.measured("a", "v", "m", 1, "s"),
        records.measured("b", "v", "m", 2, "s"),
    ]
    new = [records.measured("b", "v", "m", 3, "s")]
    merged = merge_latest(old, new)
    assert [(r.scenario, r.value) for r in merged] == [("a", 1.0), ("b", 3.0)]
