"""Link schedules: how the satellite link changes while traffic runs (rain fades, LEO path changes).

A schedule is a list of steps in satlab's terms, each at a time from the schedule's start, with
`forward` and/or `return` parameter changes in the emulator's JSON shape (delay_ms, rate_bps, ber,
per, gilbert, ...), plus two relative forms resolved against the link's parameters when the
schedule is loaded (its *base*): `rate_factor` (a fraction of the base rate) and the value `"base"`
for any field (the base value: a recovery). `repeat_s` repeats the steps with that period.

The emulator runs the steps on its own clock (lab/emulator, `schedule` command), so a fade starts
and ends on time whatever the machine is doing. File form: the same JSON as SCHEDULES' entries
(`satlab link schedule FILE.json`).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

Params = dict[str, Any]

# Rain fade on a Ka-band GEO forward link: DVB-S2 adaptive coding and modulation steps down to a
# robust MODCOD (40% of the clear-sky rate) and the residual bit errors of the fade remain
# (BER 1e-6) for 20 s, then clear sky again. Starts 10 s in, so a bulk download is under way.
RAIN_FADE: Params = {
    "name": "rain-fade",
    "summary": "forward link at 40% of its rate with BER 1e-6 from 10 s to 30 s, then clear sky",
    "steps": [
        {"at_s": 10.0, "forward": {"rate_factor": 0.4, "ber": 1e-6}},
        {"at_s": 30.0, "forward": {"rate_factor": 1.0, "ber": "base"}},
    ],
}

# A LEO pass as measured on Starlink: the constellation's scheduler reassigns a terminal's
# satellite every 15 s (at fixed seconds of each minute), and each reassignment steps the path's
# delay and loses packets for a few hundred milliseconds; 300 ms at 75% loss here, about 1.5% of
# a 15 s slot's packets. Four slots with different path delays (RTT 30, 44, 24, 38 ms), repeated.
LEO_DELAYS_MS = (15.0, 22.0, 12.0, 19.0)
LEO_SLOT_S = 15.0
LEO_OUTAGE_S = 0.3
LEO_OUTAGE_PER = 0.75


def _leo_steps() -> list[Params]:
    steps: list[Params] = []
    for i, one_way in enumerate(LEO_DELAYS_MS):
        change = {"delay_ms": one_way, "per": LEO_OUTAGE_PER}
        steps.append({"at_s": i * LEO_SLOT_S, "forward": dict(change), "return": dict(change)})
        steps.append({"at_s": i * LEO_SLOT_S + LEO_OUTAGE_S, "forward": {"per": "base"}, "return": {"per": "base"}})
    return steps


LEO_PASS: Params = {
    "name": "leo-pass",
    "summary": (f"a path change every {LEO_SLOT_S:g} s: delay steps (RTT "
                + ", ".join(f"{2 * d:g}" for d in LEO_DELAYS_MS)
                + f" ms) and {LEO_OUTAGE_S * 1000:g} ms at {LEO_OUTAGE_PER:.0%} loss at each change"),
    "repeat_s": LEO_SLOT_S * len(LEO_DELAYS_MS),
    "steps": _leo_steps(),
}

SCHEDULES: dict[str, Params] = {s["name"]: s for s in (RAIN_FADE, LEO_PASS)}
RELATIVE_FIELDS = ("rate_factor",)
DIRECTIONS = ("forward", "return")


class ScheduleError(ValueError):
    pass


def load(name_or_path: str) -> Params:
    """A named schedule (SCHEDULES) or a JSON file of the same shape."""
    if name_or_path in SCHEDULES:
        return copy.deepcopy(SCHEDULES[name_or_path])
    path = Path(name_or_path)
    if not path.is_file():
        raise ScheduleError(f"no schedule {name_or_path!r}: one of {', '.join(SCHEDULES)}, or a JSON file")
    try:
        data = json.loads(path.read_text())
    except ValueError as e:
        raise ScheduleError(f"{path}: invalid JSON: {e}") from e
    if not isinstance(data, dict):
        raise ScheduleError(f"{path}: a schedule is a JSON object")
    data.setdefault("name", path.stem)
    return data


def _number(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ScheduleError(f"{where}: must be a number")
    return float(v)


def _resolve_patch(patch: Any, base: Params, where: str) -> Params:
    if not isinstance(patch, dict):
        raise ScheduleError(f"{where}: must be an object of link parameters")
    out: Params = {}
    for key, val in patch.items():
        if key == "rate_factor":
            factor = _number(val, f"{where}.rate_factor")
            if not 0 < factor <= 1000:
                raise ScheduleError(f"{where}.rate_factor: must be in (0, 1000]")
            out["rate_bps"] = max(1, round(base["rate_bps"] * factor))
        elif val == "base":
            if key not in base:
                raise ScheduleError(f"{where}.{key}: no base value for this field")
            out[key] = copy.deepcopy(base[key])
        else:
            out[key] = val
    return out


def resolve(schedule: Params, forward: Params, ret: Params) -> Params:
    """The emulator's form (forward = `fwd_dir`) of a schedule, against base parameters forward/ret:
    {"name", "repeat_ms", "steps": [{"at_ms", "dir": "forward"|"return", "params"}]} (directions still
    in satlab's terms; `emulator_request` maps them)."""
    unknown = set(schedule) - {"name", "summary", "repeat_s", "steps"}
    if unknown:
        raise ScheduleError(f"unknown schedule field(s): {', '.join(sorted(unknown))}")
    steps = schedule.get("steps")
    if not isinstance(steps, list) or not steps:
        raise ScheduleError("steps: a non-empty list")
    out_steps: list[Params] = []
    for i, step in enumerate(steps):
        where = f"steps[{i}]"
        if not isinstance(step, dict) or set(step) - {"at_s", *DIRECTIONS}:
            raise ScheduleError(f"{where}: an object with at_s and forward and/or return")
        at_s = _number(step.get("at_s"), f"{where}.at_s")
        for d, base in zip(DIRECTIONS, (forward, ret), strict=True):
            if d in step:
                out_steps.append({"at_ms": at_s * 1000, "dir": d,
                                  "params": _resolve_patch(step[d], base, f"{where}.{d}")})
    repeat = schedule.get("repeat_s")
    return {"name": str(schedule.get("name", "")), "steps": out_steps,
            "repeat_ms": None if repeat is None else _number(repeat, "repeat_s") * 1000}


def emulator_request(resolved: Params, forward_dir: str) -> Params:
    """The emulator's `schedule` request; forward_dir is the emulator direction of `forward`."""
    reverse = "b_to_a" if forward_dir == "a_to_b" else "a_to_b"
    steps = [{"at_ms": s["at_ms"], "dir": forward_dir if s["dir"] == "forward" else reverse, "params": s["params"]}
             for s in resolved["steps"]]
    return {"cmd": "schedule", "name": resolved["name"], "repeat_ms": resolved["repeat_ms"], "steps": steps}


def rate_timeline(resolved: Params, base_rate_bps: float, horizon_s: float) -> list[tuple[float, float]]:
    """The forward rate over time from the schedule's start: [(t_s, rate_bps)], each holding until the
    next; the steps repeat up to `horizon_s` when the schedule does."""
    points = [(0.0, float(base_rate_bps))]
    fwd = [s for s in resolved["steps"] if s["dir"] == "forward" and "rate_bps" in s["params"]]
    period = (resolved["repeat_ms"] or 0) / 1000
    cycle = 0
    while fwd:
        start = cycle * period
        for s in fwd:
            t = start + s["at_ms"] / 1000
            if t > horizon_s:
                return points
            points.append((t, float(s["params"]["rate_bps"])))
        if not period:
            break
        cycle += 1
    return points


def delivery_time_s(timeline: list[tuple[float, float]], start_s: float, bits: float) -> float:
    """How long from `start_s` the link needs to carry `bits` at the timeline's rates."""
    left, t = bits, start_s
    for i, (t_i, rate) in enumerate(timeline):
        t_next = timeline[i + 1][0] if i + 1 < len(timeline) else float("inf")
        if t_next <= t:
            continue
        span = t_next - max(t, t_i)
        if rate * span >= left:
            return max(t, t_i) + left / rate - start_s
        left -= rate * span
        t = t_next
    raise ScheduleError("the timeline never carries that many bits")
