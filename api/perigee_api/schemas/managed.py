"""Request and response models of terminals managed from the hub: at the hub, the versions made for a terminal and
what it reports (services/managed_hub.py); at a terminal, joining a hub and its status
(services/managed_terminal.py)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator

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
# pending until the terminal reports it (applied, rolled_back, refused); cancelled by an admin before it went out;
# superseded when the enrollment it was made for ended (the terminal revoked or enrolled again).
ManagedState = Literal["pending", "applied", "rolled_back", "refused", "cancelled", "superseded"]
Outcome = Literal["applied", "rolled_back", "refused", "none"]
# A terminal reports at most this many sites (its config holds up to 1,024; it sends the busiest).
MAX_REPORTED_SITES = 256
Total = Annotated[int, Field(ge=0, le=2**62)]
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
    error: str | None = Field(
        description="why the terminal rolled it back or refused it, or why it was cancelled or superseded"
    )
    reported_at: float | None
    enrollment: int = Field(description="the terminal's enrollment it was made for (1 for its first key)")
    delivered_at: float | None = Field(description="first sent to the terminal: from then on it cannot be cancelled")
    ended_at: float | None = Field(description="when it was cancelled or superseded")


class ManagedVersionList(BaseModel):
    versions: list[ManagedVersionOut] = Field(description="newest first")


class SiteReport(In):
    """One site's figures as the terminal counts them (its own Sites page): totals since its gateway started."""

    name: str = Field(max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    rx_bytes: Total = Field(description="received from the satellite for the site's clients")
    tx_bytes: Total = Field(description="sent over the satellite from the site's clients")
    live_flows: Total


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
    sites: list[SiteReport] = Field(description="per site, as the terminal reported them last (at last_report_at)")
    enrollment: int | None = Field(description="its current enrollment: bumped each time it enrolls again")
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
    sites: list[SiteReport] = Field(
        default_factory=list, max_length=MAX_REPORTED_SITES, description="per site, each name once"
    )
    config: dict[str, Any] | None = Field(
        default=None,
        description="the config the terminal runs: the hub validates new versions for it against this",
    )

    @field_validator("sites")
    @classmethod
    def _once_each(cls, sites: list[SiteReport]) -> list[SiteReport]:
        seen: set[str] = set()
        twice: set[str] = set()
        for s in sites:
            (twice if s.name in seen else seen).add(s.name)
        if twice:
            raise ValueError(f"each site once: {', '.join(sorted(twice))} more than once")
        return sites


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
