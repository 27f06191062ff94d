"""The benchmark record: one measured (or skipped) number, the unit of bench/results/latest.json."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

REQUIRED_KEYS = ("scenario", "variant", "metric", "value", "unit")
SKIPPED = "skipped"


class RecordError(ValueError):
    """A record that does not follow the schema."""


@dataclass(frozen=True)
class Record:
    scenario: str
    variant: str
    metric: str
    value: float | None
    unit: str
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if not self.note:
            del data["note"]
        return data


def measured(scenario: str, variant: str, metric: str, value: float, unit: str, note: str = "") -> Record:
    return validate(Record(scenario, variant, metric, float(value), unit, note))


def missing(scenario: str, variant: str, metric: str, unit: str, note: str) -> Record:
    """A metric that the run could not produce (e.g. a threshold never reached): value null, reason in note."""
    return validate(Record(scenario, variant, metric, None, unit, note))


def skipped(scenario: str, variant: str, reason: str) -> Record:
    """A whole variant that could not run. Never a number: the reason says why."""
    return validate(Record(scenario, variant, SKIPPED, None, "", reason))


def validate(rec: Record) -> Record:
    for key in ("scenario", "variant", "metric"):
        if not isinstance(getattr(rec, key), str) or not getattr(rec, key):
            raise RecordError(f"{key} must be a non-empty string: {rec!r}")
    if not isinstance(rec.unit, str):
        raise RecordError(f"unit must be a string: {rec!r}")
    if rec.value is None:
        if not rec.note:
            raise RecordError(f"a record without a value needs a note saying why: {rec!r}")
    elif isinstance(rec.value, bool) or not isinstance(rec.value, (int, float)) or not math.isfinite(rec.value):
        raise RecordError(f"value must be a finite number or null: {rec!r}")
    if rec.metric == SKIPPED and rec.value is not None:
        raise RecordError(f"a skipped record carries no value: {rec!r}")
    return rec


def from_json(data: Any) -> Record:
    if not isinstance(data, dict):
        raise RecordError(f"record must be an object: {data!r}")
    absent = [k for k in REQUIRED_KEYS if k not in data]
    if absent:
        raise RecordError(f"record lacks {absent}: {data!r}")
    extra = set(data) - set(REQUIRED_KEYS) - {"note"}
    if extra:
        raise RecordError(f"record has unknown keys {sorted(extra)}: {data!r}")
    value = data["value"]
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise RecordError(f"value must be a number or null: {data!r}")
    return validate(
        Record(
            data["scenario"],
            data["variant"],
            data["metric"],
            None if value is None else float(value),
            data["unit"],
            data.get("note", ""),
        )
    )


def load_list(data: Any) -> list[Record]:
    if not isinstance(data, list):
        raise RecordError("latest.json must be a JSON list of records")
    return [from_json(item) for item in data]
