import pytest

from bench import metrics


def ramp_then_full(rate_bps=10e6, ramp_s=3.0, total_s=10.0, step=0.1):
    """Cumulative bytes of a flow at 0 for 0.5 s, ramping linearly to rate over ramp_s, then full rate."""
    samples, total, t = [], 0.0, 0.0
    while t < total_s - 1e-9:
        t = round(t + step, 6)
        if t <= 0.5:
            cur = 0.0
        elif t <= 0.5 + ramp_s:
            cur = rate_bps * (t - 0.5) / ramp_s
        else:
            cur = rate_bps
        total += cur * step / 8
        samples.append((t, total))
    return samples


def test_goodput_of_a_constant_stream_is_its_rate_after_one_window():
    samples = [(round(0.1 * k, 6), 125_000.0 * k) for k in range(1, 51)]  # 10 Mbit/s
    series = dict(metrics.goodput_series(samples))
    assert series[0.5] == pytest.approx(5e6)  # the window before connect() counts as empty
    assert series[1.0] == pytest.approx(10e6)
    assert series[4.0] == pytest.approx(10e6)


def test_time_to_90_percent_on_a_linear_ramp():
    samples = ramp_then_full()
    t90 = metrics.time_to_fraction(samples, 10e6, 0.9)
    # Rate r(t) = 10M*(t-0.5)/3 on the ramp; its 1 s trailing mean reaches 9 Mbit/s when
    # (t-1.0)/3 = 0.9, i.e. t = 3.7 s.
    assert t90 == pytest.approx(3.7, abs=0.11)


def test_time_to_90_percent_is_none_when_never_reached():
    samples = [(round(0.1 * k, 6), 100_000.0 * k) for k in range(1, 101)]  # 8 Mbit/s on a 10 Mbit/s link
    assert metrics.time_to_fraction(samples, 10e6, 0.9) is None
    # 0.9 s into the window the trailing mean is 0.9 × 8 Mbit/s (the pre-connect part counts as 0).
    assert metrics.time_to_fraction(samples, 8e6, 0.9) == pytest.approx(0.9)


def test_stall_keeps_the_last_count():
    samples = [(1.0, 1000.0), (5.0, 1000.0), (5.1, 2000.0)]
    assert metrics.cumulative_at(samples, 3.0) == 1000.0
    assert metrics.cumulative_at(samples, 0.5) == 0.0
    assert metrics.completion_time(samples, 2000) == 5.1
    assert metrics.completion_time(samples, 3000) is None


def test_physical_limit_formula():
    # 5 MB at 1.536 Mbit/s with 580 ms RTT: 1 RTT + 26.04 s + 0.5 RTT.
    assert metrics.physical_limit_s(5_000_000, 1_536_000, 0.58) == pytest.approx(0.58 + 40e6 / 1.536e6 + 0.29)
    # A download: 1.5 RTT before the data + size/rate + 0.5 RTT = 2 RTT + size/rate.
    assert metrics.physical_limit_s(50_000_000, 50e6, 0.6, rtts_before_data=1.5) == pytest.approx(8.0 + 1.2)
    with pytest.raises(ValueError):
        metrics.physical_limit_s(1, 0, 0.1)


def test_percentile_and_jain():
    assert metrics.percentile([5, 1, 3, 2, 4], 50) == 3
    assert metrics.percentile(list(range(1, 101)), 99) == 99
    assert metrics.jain_index([1, 1, 1, 1]) == pytest.approx(1.0)
    assert metrics.jain_index([1, 0, 0, 0]) == pytest.approx(0.25)


def test_link_progress_spreads_an_out_of_order_release_back_in_time():
    # 10 Mbit/s link (1.25 MB/s): 1 MB by t=1, nothing more until a 5 MB release at t=4.
    samples = [(1.0, 1e6), (2.0, 1e6), (3.0, 1e6), (4.0, 6e6), (5.0, 7.25e6)]
    progress = dict(metrics.link_progress(samples, 10e6))
    assert progress[4.0] == 6e6 and progress[5.0] == 7.25e6
    assert progress[3.0] == pytest.approx(4.75e6)  # 6 MB at t=4 needs 4.75 MB across by t=3
    assert progress[1.0] == pytest.approx(2.25e6)
    # The application saw a 5 MB/s burst; the link-feasible series never exceeds the link rate.
    assert (
        max(b - a for (_, a), (_, b) in zip(list(progress.items()), list(progress.items())[1:], strict=False))
        <= 1.25e6 + 1
    )


def test_a_burst_counts_from_when_the_link_must_have_carried_it():
    # Nothing for 5 s, then 1.25 MB released at t=5 on a 10 Mbit/s link: the link needed the whole
    # second (4, 5] to carry it, so that second was busy; 0.9 of it is already there at t=4.9.
    samples = [(round(0.1 * k, 6), 0.0) for k in range(1, 50)] + [
        (5.0, 1.25e6),
        (6.0, 1.25e6),
    ]
    assert metrics.time_to_fraction(samples, 10e6, 0.9) == pytest.approx(4.9)
    # 5 MB needs 4 s of link (from t=1); the first 90% second ends at 1.9.
    big = [(round(0.1 * k, 6), 0.0) for k in range(1, 50)] + [(5.0, 5e6)]
    assert metrics.time_to_fraction(big, 10e6, 0.9) == pytest.approx(1.9)
