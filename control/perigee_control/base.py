"""Base classes of the generated models."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """What the API sends the gateway: JSON types as the gateway's serde sees them (no "80" for 80, no 1.0 for
    1, no 0/1 for a boolean), finite numbers, unknown fields refused."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True, use_attribute_docstrings=True)


class Report(BaseModel):
    """What the gateway answers: read as sent, and a field a newer gateway adds is kept, not refused."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, use_attribute_docstrings=True)
