"""Request and response models of terminals managed from the hub: at the hub, the versions made for a terminal and
what it reports (services/managed_hub.py); at a terminal, joining a hub and its status
(services/managed_terminal.py)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from perigee_api.schemas.api import In
from perigee_api.schemas.trust import Fingerprint, TerminalOut

# The sections of a terminal's config its hub may set: what a site's traffic gets, never how the box is wired
# (interfaces, addresses, routes of its own LAN, its peer path, its role).
MANAGED_SECTIONS = (
    "bypass",
    "cache",
    "classes",
    "dns",
    "hybla",
    "quic",
    "satellite",
    "shaping",
    "splitter",
    "sites",
)
ManagedState = Literal["pending", "applied", "rolled_back", "refused"]
Outcome = Literal["applied", "rolled_back", "refused", "none"]
HubUrl = Annotated[
    str,
    Field(
        max_length=300,
        pattern=r"^https://[A-Za-z0-9.\-\[\]:]+(:[0-9]{1,5})?/?$",
        description="the hub's API: https://host[:port]",
    ),
]


# --- at the hub ----------------------------------------------------------------------------------------------


class ManagedVersionIn(In):
    sections: dict[str, Any] = Field(
        description="the managed sections to set, each whole, by name: " + ", ".join(MANAGED_SECTIONS)
    )
    comment: Annotated[str, Field(default="", max_length=1000)]


class ManagedVersionOut(BaseModel):
    id: int
    terminal: str
    created_at: float
    created_by: str
    comment: str
    sections: list[str] = Field(description="the names of the sections it sets")
    state: ManagedState
    error: str | None = Field(description="why the terminal rolled it back or refused it")
    reported_at: float | None


class ManagedVersionList(BaseModel):
    versions: list[ManagedVersionOut] = Field(description="newest first")


class TerminalDetail(BaseModel):
    terminal: TerminalOut
    managed: bool = Field(description="enrolled with a token: it holds a management key and polls this hub")
    last_report_at: float | None
    revision: str | None = Field(description="the config revision the terminal reports running")
    local_version_id: int | None = Field(description="that config's version at the terminal")
    software: str | None
    health_ok: bool | None
    problems: list[str]
    rx_bytes: int | None
    tx_bytes: int | None
    live_flows: int | None
    desired_version: ManagedVersionOut | None = Field(description="the newest version made for it")
    applied_version_id: int | None = Field(description="the newest version it reported applied")


class ManagedDesired(BaseModel):
    version_id: int
    sections: dict[str, Any]
    comment: str


class ManagedReport(In):
    version_id: int | None = Field(default=None, ge=1, le=2**62, description="the hub version it reports on")
    outcome: Outcome
    error: str | None = Field(default=None, max_length=4000)
    revision: str | None = Field(default=None, max_length=64)
    local_version_id: int | None = Field(default=None, ge=1, le=2**62)
    software: str | None = Field(default=None, max_length=64)
    health_ok: bool
    problems: list[Annotated[str, Field(max_length=1000)]] = Field(default_factory=list, max_length=64)
    rx_bytes: int = Field(ge=0, le=2**62)
    tx_bytes: int = Field(ge=0, le=2**62)
    live_flows: int = Field(ge=0, le=2**62)
    config: dict[str, Any] | None = Field(
        default=None,
        description="the config the terminal runs: the hub validates new versions for it against this",
    )


# --- at a terminal -------------------------------------------------------------------------------------------


class JoinIn(In):
    hub_url: HubUrl
    hub_pin: Fingerprint
    token: str = Field(max_length=256, description="the enrollment token the hub's operator made (`pgt1.`…)")


class ManagedStatus(BaseModel):
    managed: bool
    hub_url: str | None
    name: str | None = Field(description="this terminal's name at the hub")
    joined_at: float | None
    last_contact_at: float | None
    last_error: str | None
    hub_version_id: int | None = Field(description="the newest version from the hub it has seen")
    outcome: str | None = Field(description="of that version: applied, rolled_back or refused")
