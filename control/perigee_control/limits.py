"""Bounds and defaults of the gateway's config fields, read from the models generated from its schema: code that
needs "at most what the gateway accepts" asks here instead of restating a number."""

from __future__ import annotations

from typing import Any, Literal

import annotated_types
from pydantic import BaseModel


def bound(model: type[BaseModel], field: str, kind: Literal["ge", "le", "gt", "lt", "min_length", "max_length"]) -> Any:
    """The `kind` bound the schema gives `model.field` (e.g. bound(Hybla, "base_rtt_ms", "le") == 10000,
    bound(BypassRule, "ports", "max_length") == 256)."""
    for meta in model.model_fields[field].metadata:
        value = getattr(meta, kind, None)
        if isinstance(meta, annotated_types.BaseMetadata) and value is not None:
            return value
    raise LookupError(f"{model.__name__}.{field} has no {kind} bound in the gateway's schema")


def default(model: type[BaseModel], field: str) -> Any:
    """The default the schema gives `model.field`."""
    return model.model_fields[field].default


def extension(model: type[BaseModel], field: str, keyword: str) -> Any:
    """A bound JSON Schema cannot say, as the gateway's schema gives it in a keyword of its own on `model.field`
    (e.g. extension(Shaping, "rate_bps", "x-minimum-nonzero") == 8000: 0, or at least that)."""
    extra = model.model_fields[field].json_schema_extra
    if not isinstance(extra, dict) or keyword not in extra:
        raise LookupError(f"{model.__name__}.{field} has no {keyword} in the gateway's schema")
    return extra[keyword]
