"""Pure computations on measured series: goodput over time, time to a fraction of capacity, physical limits.

Series are lists of (t_seconds, cumulative_bytes) with t measured from the moment the receiver called
connect(), so every time includes the TCP handshake.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

Series = Sequence[tuple[float, float]]

SAMPLE_STEP_S = 0.1
GOODPUT_WINDOW_S = 1.0


def cumulative_at(samples: Series, t: float) -> float:
    """Bytes received by time t: the last sample at or before t (0 before the first)."""
    times = [s[0] for s in samples]
    i = bisect_right(times, t)
    return 0.0 if i == 0 else float(samples[i - 1][1])


def grid(t_end: float, step: float = SAMPLE_STEP_S) -> list[float]:
    n = round(t_end / step)
    return [round(k * step, 9) for k in range(1, n + 1)]


def goodput_series(
    samples: Series,
    window: float = GOODPUT_WINDOW_S,
    step: float = SAMPLE_STEP_S,
    t_end: float | None = None,
) -> list[tuple[float, float]]:
    """Goodput in bit/s over a trailing window, evaluated every `step` seconds.

    The value at t is (bytes received in (t - window, t]) * 8 / window; time before the connect()
    counts as zero bytes, so the first second ramps up even on an infinitely fast path.
    """
    if not samples:
        return []
    end = samples[-1][0] if t_end is None else t_end
    out = []
    for t in grid(end, step):
        delta = cumulative_at(samples, t) - cumulative_at(samples, t - window)
        out.append((t, delta * 8.0 / window))
    return out


def link_progress(samples: Series, rate_bps: float) -> list[tuple[float, float]]:
    """The fewest bytes that must have crossed a rate_bps link by each sample time.

    After a loss the receiver's kernel holds out-of-order data and hands it to the application in one
    burst when the hole is filled, so application goodput can exceed the link rate for a moment. Bytes
    delivered at time u crossed the link at most rate×(u−t) later than t, so by t at least
    max over u ≥ t of (bytes(u) − rate×(u−t)) had crossed: a backward pass spreads each burst back over
    the time the link needed to carry it.
    """
    out: list[tuple[float, float]] = []
    carried = 0.0
    for i in range(len(samples) - 1, -1, -1):
        t, b = samples[i]
        if out:
            carried -= rate_bps / 8.0 * (out[-1][0] - t)
        carried = max(float(b), carried)
        out.append((t, carried))
    out.reverse()
    return out


def time_to_fraction(
    samples: Series,
    capacity_bps: float,
    fraction: float = 0.9,
    window: float = GOODPUT_WINDOW_S,
    step: float = SAMPLE_STEP_S,
) -> float | None:
    """First time (s since connect) at which the trailing-window goodput reaches fraction × capacity.

    Goodput here is that of link_progress (bursts released from the receiver's out-of-order queue are
    spread back over the time the link needed to carry them), so a burst cannot fake a full link.
    None when it never does. The result is the end of the first window whose average reaches the
    threshold, so it is at least `window` after the first byte at the threshold rate.
    """
    if capacity_bps <= 0:
        raise ValueError("capacity must be positive")
    threshold = fraction * capacity_bps
    for t, bps in goodput_series(link_progress(samples, capacity_bps), window, step):
        if bps >= threshold - 1e-9:
            return t
    return None


def physical_limit_s(size_bytes: float, rate_bps: float, rtt_s: float, rtts_before_data: float = 1.0) -> float:
    """Shortest possible completion time of a transfer on an idle link.

    rtts_before_data × RTT (1 = the handshake, for data sent by the side that connects) + serialization
    size×8/rate + ½ RTT for the last byte to propagate. A download where the server starts sending when
    the request arrives needs rtts_before_data = 1.5 (handshake + the request's one-way trip).
    """
    if rate_bps <= 0 or rtt_s < 0 or size_bytes < 0:
        raise ValueError("size and rtt must be >= 0 and rate > 0")
    return rtts_before_data * rtt_s + size_bytes * 8.0 / rate_bps + 0.5 * rtt_s


def completion_time(samples: Series, size_bytes: float) -> float | None:
    """Time at which the cumulative count first reached size_bytes, None if it never did."""
    for t, b in samples:
        if b >= size_bytes:
            return t
    return None


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of a non-empty sequence."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-p * len(ordered) // 100))))
    return ordered[rank - 1]


def jain_index(rates: Sequence[float]) -> float:
    """Jain's fairness index: (Σx)² / (n·Σx²); 1 = perfectly fair."""
    if not rates:
        raise ValueError("no rates")
    sq = sum(x * x for x in rates)
    return 1.0 if sq == 0 else sum(rates) ** 2 / (len(rates) * sq)
