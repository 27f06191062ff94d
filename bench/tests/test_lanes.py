"""bench.tools.lanes: prefixes, one job per lane at a time, failures kept, every lane taken down."""

import threading
import time

import pytest

from bench.tools import lanes


@pytest.fixture
def downs(monkeypatch):
    taken_down: list[str] = []
    monkeypatch.setattr(lanes.lab, "down", taken_down.append)
    return taken_down


def test_lane_prefixes_derive_from_the_base_and_differ_from_it():
    assert lanes.lane_prefixes(3, "pd-") == ["pd1-", "pd2-", "pd3-"]
    assert lanes.lane_prefixes(1, "bn") == ["bn1-"]


def test_lane_prefixes_default_to_the_bench_prefix(monkeypatch):
    monkeypatch.setattr(lanes.lab, "PREFIX", "xy-")
    assert lanes.lane_prefixes(2) == ["xy1-", "xy2-"]


def test_results_keep_job_order_and_failures_do_not_lose_the_others(downs):
    def ok(value):
        return lambda prefix: (value, prefix)

    def boom(prefix):
        raise RuntimeError(f"died on {prefix}")

    out = lanes.run_parallel([ok(1), boom, ok(3)], lanes=2, base="pd-")
    assert out[0][0] == 1 and out[2][0] == 3
    assert isinstance(out[1], RuntimeError)
    assert {out[0][1], out[2][1]} <= {"pd1-", "pd2-"}
    assert sorted(downs) == ["pd1-", "pd2-"]


def test_a_lane_prefix_is_never_held_by_two_jobs_at_once(downs):
    holders: dict[str, int] = {}
    clash = threading.Event()
    lock = threading.Lock()
    most_at_once = [0]

    def job(prefix):
        with lock:
            holders[prefix] = holders.get(prefix, 0) + 1
            if holders[prefix] > 1:
                clash.set()
            most_at_once[0] = max(most_at_once[0], sum(holders.values()))
        time.sleep(0.02)
        with lock:
            holders[prefix] -= 1
        return prefix

    out = lanes.run_parallel([job] * 9, lanes=3, base="pd-")
    assert not clash.is_set()
    assert set(out) == {"pd1-", "pd2-", "pd3-"}
    assert most_at_once[0] <= 3


def test_never_more_lanes_than_jobs(downs):
    assert lanes.run_parallel([lambda p: p], lanes=4, base="pd-") == ["pd1-"]
    assert downs == ["pd1-"]


def test_longest_first_orders_by_expected_time():
    assert lanes.longest_first([3, 30, 10], lambda s: float(s)) == [30, 10, 3]


def test_makespan_is_greedy_longest_first_on_free_lanes():
    # lanes: [90] [60, 30] [30, 30] → 90; with 5 s setup per job: 95 / 100 / 70 → 100
    assert lanes.makespan([30, 90, 30, 60, 30], 3) == 90
    assert lanes.makespan([30, 90, 30, 60, 30], 3, setup_s=5) == 100
    assert lanes.makespan([10, 10], 1) == 20
    assert lanes.makespan([], 2) == 0
