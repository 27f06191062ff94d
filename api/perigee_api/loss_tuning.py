"""Bit errors on the satellite link → which satellite-leg congestion control and how much buffer.

Inputs: the link's bit error rate `ber` (both directions), the MSS, the base RTT and the windows the
BoD derivation computes (tuning.py). Formulas (p = frame loss probability):

  frame_bits       = 8 × (mss + 66)                   (a full-size frame: TCP/IP headers with
                                                       timestamps, 52 B, and Ethernet, 14 B, around it)
  p                = 1 − (1 − ber)^frame_bits          (a frame is lost when any of its bits is)
  rho              = max(base RTT / RTT0, 1), RTT0 = 25 ms (Hybla's default reference RTT)
  hybla_window     = rho × sqrt(3 / (2 p))            (Hybla's mean window under random loss p, Caini &
                                                       Firrincieli 2004, the rho-scaled Reno window;
                                                       unbounded at p = 0, shown as 65536)
  congestion_control = hybla_ld when hybla_window < the sending direction's BDP in segments (every loss
                     halves Hybla's window, and at this loss rate it cannot grow back to the pipe:
                     docs/hybla.md), hybla otherwise
  buffer_factor    = 4 when p × window ≥ 1 (a loss in every window: the receiver holds the data behind
                     a hole until its retransmission arrives, about two RTTs, and the sender keeps it
                     until it is acknowledged), 2 otherwise; per direction, on the window it sends or
                     receives
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel

from perigee_control.config import Hybla
from perigee_control.limits import bound

FRAME_OVERHEAD_BYTES = 66
RTT0_MS = 25.0
WINDOW_SHOWN_MAX = float(bound(Hybla, "cwnd_max", "le"))  # the BPF Hybla's cwnd clamp; "unbounded" is shown as this
LOSS_BUFFER_FACTOR = 4
CLEAN_BUFFER_FACTOR = 2

CongestionControl = Literal["hybla", "hybla_ld"]


class CcChoice(BaseModel):
    """The satellite-leg congestion control a profile calls for, and why."""

    value: CongestionControl
    derivation: str


def frame_loss(ber: float, mss_bytes: int) -> float:
    """Probability that a full-size frame carries at least one bit error."""
    if ber <= 0:
        return 0.0
    return -math.expm1(8 * (mss_bytes + FRAME_OVERHEAD_BYTES) * math.log1p(-ber))


def hybla_loss_window(p: float, base_rtt_ms: float) -> float:
    """Hybla's mean window (segments) under random loss p; WINDOW_SHOWN_MAX when p is 0."""
    if p <= 0:
        return WINDOW_SHOWN_MAX
    rho = max(base_rtt_ms / RTT0_MS, 1.0)
    return min(rho * math.sqrt(1.5 / p), WINDOW_SHOWN_MAX)


def buffer_factor(p: float, window_segments: float) -> int:
    """How many windows a socket buffer must hold: 4 with a loss in every window, else 2."""
    return LOSS_BUFFER_FACTOR if p * window_segments >= 1 else CLEAN_BUFFER_FACTOR


def buffer_note(factor: int) -> str:
    """What the buffer derivation adds when bit errors doubled it."""
    return " (4: a bit error in every window)" if factor > CLEAN_BUFFER_FACTOR else ""


def choose(p: float, hybla_window: float, bdp_segments: float, ber: float) -> CcChoice:
    """hybla_ld where Hybla's loss window falls short of the pipe, else hybla."""
    if p <= 0:
        return CcChoice(value="hybla", derivation="no bit errors (BER 0): hybla, the paper's algorithm")
    if hybla_window < bdp_segments:
        return CcChoice(
            value="hybla_ld",
            derivation=(
                f"BER {ber:g} loses {100 * p:.3g}% of frames; Hybla's window under that loss, "
                f"rho × sqrt(3 / 2p) = {hybla_window:,.0f} segments, is below the pipe's "
                f"{bdp_segments:,.0f}: every bit error would halve a window that cannot grow back, so "
                "hybla_ld, which keeps the window through losses without a standing queue"
            ),
        )
    return CcChoice(
        value="hybla",
        derivation=(
            f"BER {ber:g} loses {100 * p:.3g}% of frames; Hybla's window under that loss, "
            f"{hybla_window:,.0f} segments, still covers the pipe's {bdp_segments:,.0f}: hybla"
        ),
    )
