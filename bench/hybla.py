"""Is TCP Hybla usable as a congestion control here? Try `bin/perigee hybla load` once if not."""

from __future__ import annotations

from bench import procs

AVAILABLE = "/proc/sys/net/ipv4/tcp_available_congestion_control"
PERIGEE = str(procs.REPO / "bin/perigee")
_state: dict[str, str | None] = {}


def available_ccs() -> list[str]:
    try:
        with open(AVAILABLE) as f:
            return f.read().split()
    except OSError:
        return []


def ensure() -> str | None:
    """None when hybla can be used; otherwise the reason it cannot (cached for the whole run)."""
    if "reason" in _state:
        return _state["reason"]
    reason: str | None = None
    if "hybla" not in available_ccs():
        proc = procs.run([PERIGEE, "hybla", "load"], timeout=60, check=False)
        _state["loaded_by_us"] = "yes" if "hybla" in available_ccs() else None
        if "hybla" not in available_ccs():
            detail = (proc.stderr or proc.stdout).strip().splitlines()
            reason = (
                "hybla not in tcp_available_congestion_control and `perigee hybla load` failed: "
                + (detail[-1] if detail else f"exit {proc.returncode}")
            )[:240]
    _state["reason"] = reason
    return reason


def filter_ccs(ccs: list[str]) -> tuple[list[str], dict[str, str]]:
    """The congestion controls that can run, and a skip reason for each that cannot."""
    usable, skipped = [], {}
    for cc in ccs:
        if cc == "hybla":
            reason = ensure()
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
    if _state.pop("loaded_by_us", None):
        procs.run([PERIGEE, "hybla", "unload"], timeout=60, check=False)
    _state.pop("reason", None)
