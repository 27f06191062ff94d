"""Hybla's cwnd ceiling for a link, as the gateway computes it (perigee_hybla::cwnd_ceiling_for_link, printed by
`perigee hybla ceiling`): two bandwidth-delay products in segments, within 1 and the gateway's bound on
hybla.cwnd_max. The RTT is taken in µs so a derivation keeps fractional milliseconds; at whole milliseconds the result
is the gateway's (api/tests/test_schema_owned.py asks the gateway's command to prove it)."""

from __future__ import annotations

from perigee_control.config import Hybla
from perigee_control.limits import bound

CEILING_MAX: int = bound(Hybla, "cwnd_max", "le")


def two_bdp_segments(rate_bps: int, rtt_us: int, mss: int) -> int:
    """ceil(2 × rate × RTT / (8 × MSS)), unclamped; an MSS of 0 is taken as 1, as the gateway does."""
    return -(-(2 * int(rate_bps) * int(rtt_us)) // (8 * 1_000_000 * max(int(mss), 1)))


def cwnd_ceiling_for_link(rate_bps: int, rtt_us: int, mss: int) -> int:
    """The ceiling in segments, within [1, CEILING_MAX]."""
    return min(max(two_bdp_segments(rate_bps, rtt_us, mss), 1), CEILING_MAX)
