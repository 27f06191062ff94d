"""BoD (bandwidth-on-demand) profile → satellite-leg tuning.

Inputs (all per satellite link):
  forward_rate_bps      hub → terminal rate (the forward carrier share)
  return_cra_bps        return Constant Rate Assignment (always granted)
  return_rbdc_max_bps   return Rate-Based Dynamic Capacity maximum (granted on request)
  superframe_ms         return-link superframe duration (allocation granularity)
  allocation_delay_ms   request → grant delay of the DAMA scheduler
  base_rtt_ms           propagation + processing RTT without allocation delay
  terminal_buffer_bytes modem buffer in front of the return carrier
  mss_bytes             segment size used to turn bytes into segments (default 1448)
  modem_overhead_bytes  bytes the modem's framing adds to each packet and counts against its rate
                        (0 = not known: only the frame as the interface sends it is counted)

Formulas (rates in bit/s, times in s, sizes in bytes; clamp(x, lo, hi) = min(max(x, lo), hi)):
  return_rate      = return_cra + return_rbdc_max
  rtt_eff          = base_rtt + allocation_delay                  (the RTT a sender actually sees)
  bdp_forward      = forward_rate × rtt_eff / 8
  bdp_return       = return_rate × rtt_eff / 8
  grant_wait       = 2 × superframe + ceil(allocation_delay / superframe) × superframe
                     (0 without allocation delay; the DAMA worst case until the first full grant: a
                      flow starting just after a boundary is only measured from the next one, is
                      measured for one whole superframe, and its request is granted at the first
                      boundary at least one allocation delay later)
  window_forward   = forward_rate × (base_rtt + grant_wait) / 8
  window_return    = return_rate × (base_rtt + grant_wait) / 8
                     (what must be in flight to keep data arriving at the carrier rate until the first
                      full grant; never below the BDP, since grant_wait ≥ allocation_delay)
  send_rate, recv_rate, bdp_send, window_send, window_recv: the forward values on a hub,
                     the return values on a terminal (the hub sends forward, the terminal sends return)
  sndbuf           = clamp(2 × window_send, 64 KiB, 64 MiB)   (the kernel charges about twice the
  rcvbuf           = clamp(2 × window_recv, 64 KiB, 64 MiB)    payload: room for one full window)
  pacing_forward   = forward_rate
  pacing_return    = min(return_rate, return_cra + 8 × terminal_buffer / allocation_delay)
                     (until a grant arrives only CRA drains the modem buffer, so the excess over CRA
                      sent during one allocation delay must fit in the buffer: modem buffer drain bound)
  pacing_cap       = pacing_forward on a hub, pacing_return on a terminal
  initcwnd         = clamp(ceil(bdp_send / (4 × mss)), 10, 100)  (a quarter BDP in the first flight)
  initrwnd         = clamp(ceil(window_recv / mss), 10, 1000)     (let the peer fill the grant-wait
                     window at once: a one-BDP window stalls the flow before the first full grant)
                     (10 is the gateway's default initcwnd, 1000 its bound on initrwnd: both read from its
                     schema, INITWND_MIN and INITRWND_MAX)
  hybla_base_rtt   = round(base_rtt in ms)                         (Hybla's ρ = rtt / rtt0 uses it; the
                     allocation delay is left out on purpose: waiting for a grant inflates the
                     measured RTT, and must not inflate ρ and with it Hybla's aggressiveness)
  hybla_cwnd_max   = clamp(max(ceil(2 × send_rate × rtt_eff / (8 × mss)), ceil(window_send / mss)),
                           10, 65536)   segments
                     (two BDPs of the RTT the flow sees: room for the window plus about one BDP of
                      queue; stops one GEO slow-start ACK, 2^ρ segments, from becoming a line-rate
                      burst; perigee_hybla::cwnd_ceiling_for_link, docs/hybla.md; never below the
                      grant-wait window, or the ceiling would hold the sender under what the peer opens)
  shaping_rate     = pacing_forward on a hub, pacing_return on a terminal   (the aggregate egress
                     shaper on the satellite interface, config `shaping`: per-socket pacing caps each flow,
                     the shaper caps their sum. A terminal's granted rate moves between CRA and CRA + RBDC
                     max; the shaper sits at the top, not at CRA: the DAMA requests are computed from what
                     reaches the modem (input rate + backlog), so a CRA shaper would never let the modem ask
                     for more and would waste every RBDC grant; at the top, the queue stays in the gateway
                     whenever the grant is at its top, and below it the excess waits in the modem buffer,
                     which is what makes the modem request more. The modem buffer drain bound caps it like
                     pacing: together, the flows must not put more into the modem during one allocation
                     delay than one paced flow may. 0 by override = shaping off)
  shaping_overhead = modem_overhead_bytes
  min_terminal_buffer = return_rate × superframe / 8               (one superframe of return traffic;
                     a smaller buffer drops inside a superframe: reported as a warning)
  frame_loss_pct, hybla_loss_window, the buffer factors (send 2, or 4 with a bit error in every window;
  receive 4) and the satellite congestion control (hybla_ld, the gateway's default; hybla on a DAMA link) from the
  input `ber`:
  loss_tuning.py

Every derived value is returned with a `derivation` string showing the numbers; any value may be
overridden (then `overridden` is true and the derivation still shows the computed number).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from perigee_api import loss_tuning
from perigee_control.bod import write_tuning
from perigee_control.config import Hybla, Role, Satellite, Shaping
from perigee_control.hybla import two_bdp_segments
from perigee_control.limits import bound, default, extension

KIB = 1024
MIB = 1024 * 1024
SOCKBUF_MIN = 64 * KIB
SOCKBUF_MAX = 64 * MIB
# Initial windows never below the gateway's own default (Linux's 10 segments), nor a ceiling under it.
INITWND_MIN: int = default(Satellite, "initcwnd")
CWND_MAX_MIN = INITWND_MIN
INITCWND_MAX = 100  # the derivation's cap: a first flight of a quarter BDP stays within what a modem queue holds
# The config's bounds, from the gateway's schema: what "write to config" can store.
INITRWND_MAX: int = bound(Satellite, "initrwnd", "le")
CWND_MAX_MAX: int = bound(Hybla, "cwnd_max", "le")
SHAPING_MIN_BPS: int = extension(Shaping, "rate_bps", "x-minimum-nonzero")  # shaping.rate_bps when on (0 = off)
SHAPING_OVERHEAD_MAX: int = bound(Shaping, "overhead_bytes", "le")
BASE_RTT_MAX_MS: int = bound(Hybla, "base_rtt_ms", "le")
RATE_MAX_BPS: int = bound(Satellite, "forward_rate_bps", "le")

DerivedKey = Literal[
    "return_rate_bps",
    "rtt_eff_ms",
    "bdp_forward_bytes",
    "bdp_return_bytes",
    "grant_wait_ms",
    "window_forward_bytes",
    "window_return_bytes",
    "sndbuf_bytes",
    "rcvbuf_bytes",
    "pacing_forward_bps",
    "pacing_return_bps",
    "pacing_rate_bps",
    "initcwnd",
    "initrwnd",
    "hybla_base_rtt_ms",
    "hybla_cwnd_max",
    "shaping_rate_bps",
    "shaping_overhead_bytes",
    "min_terminal_buffer_bytes",
    "frame_loss_pct",
    "hybla_loss_window",
]
OVERRIDABLE: tuple[str, ...] = (
    "sndbuf_bytes",
    "rcvbuf_bytes",
    "pacing_rate_bps",
    "initcwnd",
    "initrwnd",
    "hybla_base_rtt_ms",
    "hybla_cwnd_max",
    "shaping_rate_bps",
)


# The link a new BoD profile starts from: a GEO HTS carrier (50 Mbit/s forward) with a DVB-RCS2 return (1 Mbit/s CRA
# plus up to 4 Mbit/s RBDC, 26.5 ms superframes, a 250 ms allocation delay), 560 ms base RTT, a 256 KiB modem buffer.
# The inputs with a default start at it. Published as the schema's example (`BodInputs.starting`), which the
# dashboard's generated client carries (webui/src/api/examples.gen.ts): the form starts here, nothing restates it.
STARTING_LINK: dict[str, Any] = {
    "forward_rate_bps": 50_000_000,
    "return_cra_bps": 1_000_000,
    "return_rbdc_max_bps": 4_000_000,
    "superframe_ms": 26.5,
    "allocation_delay_ms": 250.0,
    "base_rtt_ms": 560.0,
    "terminal_buffer_bytes": 256 * KIB,
}


def _starting_example(schema: dict[str, Any]) -> None:
    schema["examples"] = [BodInputs.starting().model_dump(mode="json")]


class BodInputs(BaseModel):
    # Strict (no "600" or true for a number) and within physical bounds: a superframe or an RTT under 1 ms is no
    # satellite link, and a subnormal one (5e-324) turned every division into infinity. The link's own figures
    # have no default (a profile must state them); the schema's example is where a new profile starts.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True, json_schema_extra=_starting_example)

    forward_rate_bps: int = Field(ge=1000, le=RATE_MAX_BPS)
    return_cra_bps: int = Field(ge=0, le=RATE_MAX_BPS)
    return_rbdc_max_bps: int = Field(ge=0, le=RATE_MAX_BPS)
    superframe_ms: float = Field(ge=1, le=10_000)
    allocation_delay_ms: float = Field(ge=0, le=60_000, description="0 = no DAMA wait, else at least 1 ms")
    base_rtt_ms: float = Field(
        ge=1, le=BASE_RTT_MAX_MS, description="at most what the config's hybla.base_rtt_ms can hold"
    )
    terminal_buffer_bytes: int = Field(ge=1500, le=4 * 1024 * MIB)
    mss_bytes: int = Field(default=1448, ge=536, le=65000)
    modem_overhead_bytes: int = Field(
        default=0,
        ge=0,
        le=SHAPING_OVERHEAD_MAX,
        description="bytes the modem's framing (its encapsulation) adds to each packet and counts against the "
        "carrier rate; 0 = not known, only the frame as the interface sends it is counted",
    )
    role: Role = "hub"
    ber: float = Field(
        default=0.0,
        ge=0,
        le=1e-4,
        description="bit error rate of the satellite link (both directions, after FEC); 0 = clean",
    )

    @property
    def waits_for_grants(self) -> bool:
        """A DAMA scheduler's request → grant delay (below a microsecond counts as none)."""
        return self.allocation_delay_ms >= 0.001

    @property
    def grants_on_request(self) -> bool:
        """Return capacity above the CRA comes on request, after the allocation delay (DAMA)."""
        return self.return_rbdc_max_bps > 0 and self.waits_for_grants

    @classmethod
    def starting(cls) -> BodInputs:
        """Where a new profile starts (the schema's example): STARTING_LINK, every other input at its default."""
        return cls.model_validate(STARTING_LINK)

    @model_validator(mode="after")
    def _return_rate_positive(self) -> BodInputs:
        if self.return_cra_bps + self.return_rbdc_max_bps <= 0:
            raise ValueError("return_cra_bps + return_rbdc_max_bps must be above 0")
        return self

    @field_validator("allocation_delay_ms")
    @classmethod
    def _no_sub_millisecond_delay(cls, value: float) -> float:
        if 0 < value < 1:
            raise ValueError("must be 0 (no DAMA wait) or at least 1 ms")
        return value


class Derived(BaseModel):
    value: float
    unit: str
    derivation: str
    overridden: bool = False
    overridable: bool = Field(default=False, description="a profile's overrides may set it")
    computed: float


class Tuning(BaseModel):
    values: dict[str, Derived]
    warnings: list[str]
    congestion_control: loss_tuning.CcChoice


def _n(x: float) -> str:
    """Number with thousands separators, integers without decimals."""
    if float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:,.4f}".rstrip("0").rstrip(".")


def _clamp(x: float, lo: float, hi: float) -> float:
    return min(max(x, lo), hi)


def derive(inputs: BodInputs, overrides: dict[str, float] | None = None) -> Tuning:
    overrides = overrides or {}
    out: dict[str, Derived] = {}
    warnings: list[str] = []

    def put(key: str, value: float, unit: str, derivation: str) -> float:
        final = float(overrides[key]) if key in overrides else value
        text = derivation if key not in overrides else f"override {_n(final)} (computed: {derivation})"
        out[key] = Derived(
            value=final,
            unit=unit,
            derivation=text,
            overridden=key in overrides,
            overridable=key in OVERRIDABLE,
            computed=value,
        )
        return final

    i = inputs
    ret = put(
        "return_rate_bps",
        i.return_cra_bps + i.return_rbdc_max_bps,
        "bit/s",
        f"CRA + RBDC max = {_n(i.return_cra_bps)} + {_n(i.return_rbdc_max_bps)}"
        f" = {_n(i.return_cra_bps + i.return_rbdc_max_bps)} bit/s",
    )
    rtt_ms = i.base_rtt_ms + i.allocation_delay_ms
    put(
        "rtt_eff_ms",
        rtt_ms,
        "ms",
        f"base RTT + allocation delay = {_n(i.base_rtt_ms)} + {_n(i.allocation_delay_ms)} = {_n(rtt_ms)} ms",
    )
    rtt_s = rtt_ms / 1000.0
    bdp_f = math.ceil(i.forward_rate_bps * rtt_s / 8)
    bdp_r = math.ceil(ret * rtt_s / 8)
    put(
        "bdp_forward_bytes",
        bdp_f,
        "bytes",
        f"forward rate × RTT_eff / 8 = {_n(i.forward_rate_bps)} × {_n(rtt_s)} / 8 = {_n(bdp_f)} B",
    )
    put(
        "bdp_return_bytes",
        bdp_r,
        "bytes",
        f"return rate × RTT_eff / 8 = {_n(ret)} × {_n(rtt_s)} / 8 = {_n(bdp_r)} B",
    )
    hub = i.role == "hub"
    if i.waits_for_grants:
        sfs = math.ceil(i.allocation_delay_ms / i.superframe_ms - 1e-9)  # float noise must not add one
        wait_ms = (2 + sfs) * i.superframe_ms
        wait_text = (
            f"2 × superframe + ceil(allocation delay / superframe) × superframe = 2 × {_n(i.superframe_ms)}"
            f" + ceil({_n(i.allocation_delay_ms)} / {_n(i.superframe_ms)}) × {_n(i.superframe_ms)}"
            f" = {_n(wait_ms)} ms (to the next boundary, one measured superframe, then the grant)"
        )
    else:
        wait_ms = 0.0
        wait_text = "no allocation delay: nothing waits for a grant = 0 ms"
    put("grant_wait_ms", wait_ms, "ms", wait_text)
    win_s = (i.base_rtt_ms + wait_ms) / 1000.0
    win_f = math.ceil(i.forward_rate_bps * win_s / 8)
    win_r = math.ceil(ret * win_s / 8)
    put(
        "window_forward_bytes",
        win_f,
        "bytes",
        f"forward rate × (base RTT + grant wait) / 8 = {_n(i.forward_rate_bps)} × {_n(win_s)} / 8 = {_n(win_f)} B",
    )
    put(
        "window_return_bytes",
        win_r,
        "bytes",
        f"return rate × (base RTT + grant wait) / 8 = {_n(ret)} × {_n(win_s)} / 8 = {_n(win_r)} B",
    )
    bdp_send = bdp_f if hub else bdp_r  # initcwnd: a quarter BDP, not the grant-wait window
    win_send, win_recv = (win_f, win_r) if hub else (win_r, win_f)
    send_dir, recv_dir = ("forward", "return") if hub else ("return", "forward")

    p_loss = loss_tuning.frame_loss(i.ber, i.mss_bytes)
    k_snd = loss_tuning.buffer_factor(p_loss, win_send / i.mss_bytes)
    k_rcv = loss_tuning.receive_buffer_factor()
    snd = _clamp(k_snd * win_send, SOCKBUF_MIN, SOCKBUF_MAX)
    put(
        "sndbuf_bytes",
        snd,
        "bytes",
        f"{k_snd} × window_{send_dir} = {k_snd} × {_n(win_send)} = {_n(k_snd * win_send)} B, clamped to "
        f"[{_n(SOCKBUF_MIN)}, {_n(SOCKBUF_MAX)}] = {_n(snd)} B" + loss_tuning.buffer_note(k_snd),
    )
    rcv = _clamp(k_rcv * win_recv, SOCKBUF_MIN, SOCKBUF_MAX)
    put(
        "rcvbuf_bytes",
        rcv,
        "bytes",
        f"{k_rcv} × window_{recv_dir} = {k_rcv} × {_n(win_recv)} = {_n(k_rcv * win_recv)} B, clamped to "
        f"[{_n(SOCKBUF_MIN)}, {_n(SOCKBUF_MAX)}] = {_n(rcv)} B" + loss_tuning.buffer_note(k_rcv, receive=True),
    )
    pf = put("pacing_forward_bps", i.forward_rate_bps, "bit/s", f"forward rate = {_n(i.forward_rate_bps)} bit/s")
    if i.waits_for_grants:  # (and no x / 0)
        drain = i.return_cra_bps + 8 * i.terminal_buffer_bytes / (i.allocation_delay_ms / 1000.0)
        drain_text = (
            f"CRA + 8 × terminal buffer / allocation delay = {_n(i.return_cra_bps)} + 8 × "
            f"{_n(i.terminal_buffer_bytes)} / {_n(i.allocation_delay_ms / 1000.0)} = {_n(round(drain))} bit/s"
        )
    else:
        drain = float(ret)
        drain_text = "no allocation delay: the buffer never waits for a grant"
    pr_val = math.floor(min(ret, drain))
    pr = put(
        "pacing_return_bps",
        pr_val,
        "bit/s",
        f"min(return rate, modem buffer drain) = min({_n(ret)}, {_n(round(drain))}) = {_n(pr_val)} bit/s"
        f" where drain = {drain_text}",
    )
    pacing = pf if hub else pr
    put(
        "pacing_rate_bps",
        pacing,
        "bit/s",
        f"{'hub: pacing_forward' if hub else 'terminal: pacing_return'} = {_n(pacing)} bit/s",
    )
    cw_raw = math.ceil(bdp_send / (4 * i.mss_bytes))
    cw = _clamp(cw_raw, INITWND_MIN, INITCWND_MAX)
    put(
        "initcwnd",
        cw,
        "segments",
        f"ceil(BDP_{send_dir} / (4 × MSS)) = ceil({_n(bdp_send)} / (4 × {i.mss_bytes})) = {cw_raw},"
        f" clamped to [{INITWND_MIN}, {INITCWND_MAX}] = {_n(cw)}",
    )
    rw_raw = math.ceil(win_recv / i.mss_bytes)
    rw = _clamp(rw_raw, INITWND_MIN, INITRWND_MAX)
    put(
        "initrwnd",
        rw,
        "segments",
        f"ceil(window_{recv_dir} / MSS) = ceil({_n(win_recv)} / {i.mss_bytes}) = {rw_raw},"
        f" clamped to [{INITWND_MIN}, {_n(INITRWND_MAX)}] = {_n(rw)}",
    )
    put(
        "hybla_base_rtt_ms",
        round(i.base_rtt_ms),
        "ms",
        f"round(base RTT) = round({_n(i.base_rtt_ms)}) = {round(i.base_rtt_ms)} ms"
        " (allocation delay left out: BoD waiting must not inflate Hybla's ρ)",
    )
    send_rate = i.forward_rate_bps if hub else ret
    # The gateway's formula (perigee_control.hybla); the RTT in µs keeps fractional ms exact enough.
    bdp2_raw = two_bdp_segments(int(send_rate), round(rtt_ms * 1000), i.mss_bytes)
    win_segs = math.ceil(win_send / i.mss_bytes)
    cm_raw = max(bdp2_raw, win_segs)
    cm = _clamp(cm_raw, CWND_MAX_MIN, CWND_MAX_MAX)
    put(
        "hybla_cwnd_max",
        cm,
        "segments",
        f"max(ceil(2 × {send_dir} rate × RTT_eff / (8 × MSS)), ceil(window_{send_dir} / MSS)) = "
        f"max(ceil(2 × {_n(send_rate)} × {_n(rtt_s)} / (8 × {i.mss_bytes})), ceil({_n(win_send)} / "
        f"{i.mss_bytes})) = max({_n(bdp2_raw)}, {_n(win_segs)}) = {_n(cm_raw)}, clamped to "
        f"[{CWND_MAX_MIN}, {_n(CWND_MAX_MAX)}] = {_n(cm)}"
        " (two BDPs: Hybla's window never bursts far beyond what the link and modem queue hold;"
        " at least the grant-wait window the peer opens)",
    )
    if hub:
        shaping_text = f"hub: forward rate = {_n(i.forward_rate_bps)} bit/s (the forward carrier is not on demand)"
    else:
        # The top of the grant, not CRA (see the docstring): the modem asks for RBDC only for what reaches
        # it, so a CRA shaper would pin the grant at CRA; the drain bound holds the sum of all flows to
        # what one paced flow may put into the modem buffer while it waits for a grant.
        shaping_text = (
            f"terminal: pacing_return = min(CRA + RBDC max, modem buffer drain) = {_n(pr_val)} bit/s"
            " (the top of the grant, not CRA: the modem requests RBDC only for what reaches it, so shaping"
            " at CRA would never let the grant rise; below the top the excess waits in the modem buffer)"
        )
    put("shaping_rate_bps", i.forward_rate_bps if hub else pr_val, "bit/s", shaping_text)
    put(
        "shaping_overhead_bytes",
        i.modem_overhead_bytes,
        "bytes",
        f"modem framing per packet = {i.modem_overhead_bytes} B"
        if i.modem_overhead_bytes
        else "modem framing not in the profile = 0 B (each packet counted as the interface sends it)",
    )
    need = math.ceil(ret * i.superframe_ms / 1000.0 / 8)
    put(
        "min_terminal_buffer_bytes",
        need,
        "bytes",
        f"return rate × superframe / 8 = {_n(ret)} × {_n(i.superframe_ms / 1000.0)} / 8 = {_n(need)} B",
    )
    if i.terminal_buffer_bytes < need:
        warnings.append(
            f"terminal_buffer_bytes {_n(i.terminal_buffer_bytes)} is below one superframe of return "
            f"traffic ({_n(need)} B): expect drops inside a superframe"
        )
    if i.allocation_delay_ms and i.allocation_delay_ms < i.superframe_ms:
        warnings.append("allocation_delay_ms is shorter than one superframe: check the scheduler settings")
    put(
        "frame_loss_pct",
        100 * p_loss,
        "%",
        f"1 − (1 − BER)^(8 × (MSS + 66)) = 1 − (1 − {i.ber:g})^{8 * (i.mss_bytes + 66)} = {100 * p_loss:.4g}%",
    )
    hw = loss_tuning.hybla_loss_window(p_loss, i.base_rtt_ms)
    put(
        "hybla_loss_window",
        round(hw),
        "segments",
        f"max(base RTT / 25 ms, 1) × sqrt(3 / (2 × {p_loss:.4g})) = {_n(round(hw))} segments"
        if p_loss > 0
        else "no bit errors: Hybla's window is not bounded by loss (shown as 65,536)",
    )
    cc = loss_tuning.choose(p_loss, hw, bdp_send / i.mss_bytes, i.ber, i.base_rtt_ms, i.grants_on_request)
    return Tuning(values=out, warnings=warnings, congestion_control=cc)


def write_config(cfg: dict[str, Any], inputs: BodInputs, tuning: Tuning) -> None:
    """A derivation into a config's JSON (changed in place), through the one mapping (perigee_control.bod)."""
    write_tuning(
        cfg,
        congestion_control=tuning.congestion_control.value,
        values={k: d.value for k, d in tuning.values.items()},
        forward_rate_bps=inputs.forward_rate_bps,
        return_rate_bps=inputs.return_cra_bps + inputs.return_rbdc_max_bps,
    )
