"""Is TCP Hybla (or hybla_ld) usable as a congestion control here? Load it with `bin/perigee hybla
load` if not (that registers both).

Hybla (Perigee's BPF struct_ops one where the kernel has no tcp_hybla) is registered machine-wide,
and other people's tests may load and unload it at any time, so we check before every transfer that needs it and
reload if it vanished. A failed load is remembered for the rest of the run.
"""

from __future__ import annotations

from bench import procs

AVAILABLE = "/proc/sys/net/ipv4/tcp_available_congestion_control"
PERIGEE = str(procs.REPO / "bin/perigee")
_state: dict[str, str] = {}


def available_ccs() -> list[str]:
    try:
        with open(AVAILABLE) as f:
            return f.read().split()
    except OSError:
        return []


LOADED_BY_PERIGEE = ("hybla", "hybla_ld")


def ensure(name: str = "hybla") -> str | None:
    """None when `name` (hybla or hybla_ld) can be used now; otherwise the reason it cannot."""
    if name in available_ccs():
        return None
    failed = f"failed:{name}"
    if failed in _state:
        return _state[failed]
    had_hybla = "hybla" in available_ccs()
    proc = procs.run([PERIGEE, "hybla", "load"], timeout=60, check=False)
    if name in available_ccs():
        if not had_hybla:
            _state["loaded_by_us"] = "yes"
        return None
    detail = (proc.stderr or proc.stdout).strip().splitlines()
    _state[failed] = (
        f"{name} not in tcp_available_congestion_control and `perigee hybla load` failed: "
        + (detail[-1] if detail else f"exit {proc.returncode}")
    )[:240]
    return _state[failed]


def filter_ccs(ccs: list[str]) -> tuple[list[str], dict[str, str]]:
    """The congestion controls that can run, and a skip reason for each that cannot."""
    usable, skipped = [], {}
    for cc in ccs:
        if cc in LOADED_BY_PERIGEE:
            reason = ensure(cc)
            if reason:
                skipped[cc] = reason
                continue
        elif cc not in available_ccs():
            skipped[cc] = f"{cc} not in tcp_available_congestion_control"
            continue
        usable.append(cc)
    return usable, skipped


def release() -> None:
    """Unload the BPF Hybla only if this run loaded it (never one that was already there)."""
    if _state.pop("loaded_by_us", None) and "hybla" in available_ccs():
        procs.run([PERIGEE, "hybla", "unload"], timeout=60, check=False)
    _state.clear()
