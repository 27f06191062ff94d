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
  congestion_control = hybla on a GEO path (base RTT of 200 ms or more) whose return link's capacity comes on
                     request (DAMA: an RBDC above 0 granted after an allocation delay); else hybla_ld,
                     whatever the BER: the gateway's default (docs/hybla.md, *The default*), on a short
                     (non-GEO) path with its rho at least 6, where the gateway switches nothing.
                     On a DAMA link a queue is how the terminal asks for capacity, and the ACKs that clock
                     the sender wait for the return link's grant too: the delay rises while the grant ramps
                     up. hybla_ld reads that as a standing queue and cuts its window to what the grant carries
                     now, which lowers the next request and the grant with it (measured on satlab
                     geo-skyplex: 0.1-0.6 of the 1.144 Mbit/s after the first seconds, against 1.07 with
                     hybla). Hybla keeps its window and rides the grant; a bit error halves it.
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

from pydantic import BaseModel

from perigee_control.config import CongestionControl, Hybla, Satellite
from perigee_control.limits import bound, default, extension

FRAME_OVERHEAD_BYTES = 66
RTT0_MS = float(default(Hybla, "rtt0_ms"))  # Hybla's reference RTT: the gateway's default
WINDOW_SHOWN_MAX = float(bound(Hybla, "cwnd_max", "le"))  # the BPF Hybla's cwnd clamp; "unbounded" is shown as this
LOSS_BUFFER_FACTOR = 4
CLEAN_BUFFER_FACTOR = 2

# The gateway's default satellite congestion control; the base RTT below which a path is short (not GEO), where
# the default's rho is its floor (gateway/bpf/hybla_math.h, gateway/crates/perigee/src/gateway/satleg_auto.rs);
# both from its schema.
DEFAULT_CC: CongestionControl = default(Satellite, "congestion_control")
SHORT_PATH_RTT_MS = float(extension(Satellite, "congestion_control", "x-short-path-rtt-ms"))
LD_RHO_MIN = int(extension(Satellite, "congestion_control", "x-ld-rho-min"))
# On a link whose return capacity is granted on request (see the module's docstring).
DAMA_CC: CongestionControl = "hybla"


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


def choose(p: float, hybla_window: float, bdp_segments: float, ber: float, base_rtt_ms: float, dama: bool) -> CcChoice:
    """What the gateway runs: Hybla on a DAMA link, else hybla_ld, its default; the derivation says what Hybla
    alone would do at this BER (on a short path, why its default suits it)."""
    if base_rtt_ms < SHORT_PATH_RTT_MS:
        return CcChoice(
            value=DEFAULT_CC,
            derivation=(
                f"base RTT {base_rtt_ms:g} ms < {SHORT_PATH_RTT_MS:g} ms: not a GEO path, where Hybla's rho "
                f"(RTT / {RTT0_MS:g} ms) is near 1 and it grows like Reno. {DEFAULT_CC}, the gateway's default, takes "
                f"rho {LD_RHO_MIN} there ({LD_RHO_MIN * LD_RHO_MIN} segments per RTT) and keeps its window through "
                "a loss without a standing queue, so a LEO path change's loss burst or a bit error neither halves it "
                "nor leaves it slow to grow back"
            ),
        )
    if dama:
        cost = (
            f" At BER {ber:g} ({100 * p:.3g}% of frames) each bit error halves Hybla's window"
            f" (its mean under that loss: {hybla_window:,.0f} segments, the pipe: {bdp_segments:,.0f})"
            if p > 0
            else ""
        )
        return CcChoice(
            value=DAMA_CC,
            derivation=(
                f"the return link's capacity comes on request (DAMA): a queue is how the terminal asks for it, and "
                f"the delay rises while the grant ramps up. {DEFAULT_CC} would read that delay as a standing queue "
                f"and cut its window to what the grant carries now, lowering the next request and the grant with "
                f"it; {DAMA_CC} keeps its window and rides the grant.{cost}"
            ),
        )
    why = (
        f"{DEFAULT_CC}, the gateway's default: Hybla's growth, and a loss without a standing queue (a rain fade's "
        "bit errors, a LEO path change) keeps the window instead of halving it"
    )
    if p <= 0:
        return CcChoice(
            value=DEFAULT_CC,
            derivation=f"BER 0 today; tomorrow's rain fade has its own: {why}. With no loss it grows as hybla",
        )
    if hybla_window < bdp_segments:
        return CcChoice(
            value=DEFAULT_CC,
            derivation=(
                f"BER {ber:g} loses {100 * p:.3g}% of frames; Hybla's window under that loss, "
                f"rho × sqrt(3 / 2p) = {hybla_window:,.0f} segments, is below the pipe's "
                f"{bdp_segments:,.0f}: every bit error would halve a window that cannot grow back. {why}"
            ),
        )
    return CcChoice(
        value=DEFAULT_CC,
        derivation=(
            f"BER {ber:g} loses {100 * p:.3g}% of frames; Hybla's window under that loss, "
            f"{hybla_window:,.0f} segments, still covers the pipe's {bdp_segments:,.0f}, but a fade's will not. "
            f"{why}"
        ),
    )
