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
  congestion_control = bbr when the base RTT is under 200 ms (a short, non-GEO path: the gateway switches
                     its default to BBR there by itself), else hybla_ld, whatever the BER: the gateway's
                     default (docs/hybla.md, *The default*).
                     Nobody knows the BER of tomorrow's rain fade, and a LEO link loses packets at every path
                     change; hybla_ld grows as Hybla does, and a loss without a standing queue does not halve
                     it. The derivation says what Hybla alone would hold at the given BER.
  send buffer      = 4 windows when p × window ≥ 1 (a loss in every window: the sender keeps the data behind a
                     hole until it is acknowledged, about two RTTs), 2 otherwise (the send buffer is what a
                     bulk flow fills: memory per flow)
  receive buffer   = 4 windows always (the receiver holds the data behind a hole until its retransmission
                     arrives; while frames arrive in order the relay reads them at once and the buffer stays
                     empty, so the room costs nothing until a fade needs it)
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

CongestionControl = Literal["hybla", "hybla_ld", "bbr"]
# Below this base RTT the gateway switches a default satellite leg to BBR (a short, non-GEO path:
# gateway/crates/perigee/src/gateway/satleg_auto.rs, SHORT_PATH_RTT_US).
SHORT_PATH_RTT_MS = 200.0


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
    """How many windows a send buffer must hold: 4 with a loss in every window, else 2."""
    return LOSS_BUFFER_FACTOR if p * window_segments >= 1 else CLEAN_BUFFER_FACTOR


def receive_buffer_factor() -> int:
    """How many windows a receive buffer holds: always the lossy link's 4 (free until a loss needs it)."""
    return LOSS_BUFFER_FACTOR


def buffer_note(factor: int, receive: bool = False) -> str:
    """What the buffer derivation adds when it is more than two windows."""
    if receive:
        return " (4: room for the data behind a loss, whatever the BER; empty while frames arrive in order)"
    return " (4: a bit error in every window)" if factor > CLEAN_BUFFER_FACTOR else ""


def choose(p: float, hybla_window: float, bdp_segments: float, ber: float, base_rtt_ms: float) -> CcChoice:
    """What the gateway runs: BBR on a short path, else hybla_ld, its default; the derivation says
    what Hybla alone would do at this BER."""
    if base_rtt_ms < SHORT_PATH_RTT_MS:
        return CcChoice(
            value="bbr",
            derivation=(
                f"base RTT {base_rtt_ms:g} ms < {SHORT_PATH_RTT_MS:g} ms: not a GEO path, where Hybla grows like "
                "Reno (rho near 1) and a LEO path change's loss burst halves it; the gateway switches its "
                "default to BBR on such a path by itself"
            ),
        )
    default = (
        "hybla_ld, the gateway's default: Hybla's growth, and a loss without a standing queue (a rain fade's "
        "bit errors, a LEO path change) keeps the window instead of halving it"
    )
    if p <= 0:
        return CcChoice(
            value="hybla_ld",
            derivation=f"BER 0 today; tomorrow's rain fade has its own: {default}. With no loss it grows as hybla",
        )
    if hybla_window < bdp_segments:
        return CcChoice(
            value="hybla_ld",
            derivation=(
                f"BER {ber:g} loses {100 * p:.3g}% of frames; Hybla's window under that loss, "
                f"rho × sqrt(3 / 2p) = {hybla_window:,.0f} segments, is below the pipe's "
                f"{bdp_segments:,.0f}: every bit error would halve a window that cannot grow back. {default}"
            ),
        )
    return CcChoice(
        value="hybla_ld",
        derivation=(
            f"BER {ber:g} loses {100 * p:.3g}% of frames; Hybla's window under that loss, "
            f"{hybla_window:,.0f} segments, still covers the pipe's {bdp_segments:,.0f}, but a fade's will not. "
            f"{default}"
        ),
    )
