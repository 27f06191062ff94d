"""Request and response models of who may talk to whom: the terminals enrolled at a hub, each gateway's own
identity for the peer path and the hub a terminal pins, and the fleet CA's revocations."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from perigee_api.schemas.api import ApplyOut, In
from perigee_api.schemas.gateway_config import Cidr, Name
from perigee_control.reports import PeerStatus

FINGERPRINT_PATTERN = r"^sha256:[0-9a-f]{64}$"
Fingerprint = Annotated[
    str,
    Field(
        pattern=FINGERPRINT_PATTERN,
        description="a gateway identity's fingerprint: `sha256:` and 64 lowercase hex digits (the SHA-256 of its "
        "certificate's SubjectPublicKeyInfo), as the gateway's own dashboard shows it",
    ),
]
Comment = Annotated[str, Field(default="", max_length=1000)]


# --- fleet revocation ------------------------------------------------------------------------------------------


class RevocationPush(BaseModel):
    gateway: str
    ok: bool = Field(description="the gateway took the revocation list")
    persisted: bool = Field(description="and keeps it across a restart (started with --control-tls-crl)")
    error: dict[str, Any] | None


class GatewayRemoved(BaseModel):
    ok: bool = True
    revoked: bool = Field(
        description="its certificate is on the fleet CA's revocation list; false for one issued before the API "
        "kept serials (it stays valid until it expires: rotate the fleet CA to end it sooner)"
    )
    pushed: list[RevocationPush] = Field(description="the revocation list sent to every remaining gateway")


# --- terminals enrolled at the hub -----------------------------------------------------------------------------


class TerminalIn(In):
    name: Name
    prefixes: list[Cidr] = Field(min_length=1, max_length=64, description="the site's prefixes (clients' addresses)")
    fingerprint: Fingerprint
    comment: Comment


class FingerprintIn(In):
    fingerprint: Fingerprint
    comment: Comment


class TerminalOnGateway(BaseModel):
    """One hub gateway's view of an enrolled terminal (GET /v1/peer)."""

    gateway: str
    idle_connections: int
    live_flows: int
    refused_prefix: int = Field(description="flows refused: their client address is not one of its prefixes")
    refused_other: int
    last_seen: float | None


class TerminalOut(BaseModel):
    name: str
    fingerprints: list[str]
    prefixes: list[str]
    applied: bool = Field(description="enrolled in the config the gateways run (else only in the desired one)")
    connected: bool = Field(description="at least one of its connections is open at a hub gateway")
    idle_connections: int
    live_flows: int
    refused_prefix: int
    refused_other: int
    last_seen: float | None
    gateways: list[TerminalOnGateway]


class GatewayAnswerError(BaseModel):
    gateway: str
    error: dict[str, Any]


class TerminalList(BaseModel):
    role: str = Field(description="the desired config's role: terminals are enrolled at a hub")
    terminals: list[TerminalOut]
    refused_unknown: int = Field(description="connections refused at the hub gateways: an identity nobody enrolled")
    desired_version_id: int | None
    active_version_id: int | None
    errors: list[GatewayAnswerError] = Field(description="hub gateways whose peer state could not be read")


class TerminalChangeOut(BaseModel):
    version_id: int = Field(description="the new config version holding the change")
    apply: ApplyOut


# --- this box's identity and its hub ---------------------------------------------------------------------------


class IdentityOut(BaseModel):
    gateway: str
    fingerprint: str | None
    certificate_pem: str | None = Field(description="public: what the fingerprint is taken from")
    next_fingerprint: str | None = Field(description="a staged next identity (rotation), until committed")
    error: dict[str, Any] | None


class IdentityList(BaseModel):
    role: str
    identities: list[IdentityOut] = Field(description="each gateway of the fleet: the local one first")
    peer: PeerStatus | None = Field(description="the local gateway's peer path state (GET /v1/peer)")
    peer_error: dict[str, Any] | None


class HubIn(In):
    hub: str = Field(max_length=64, description="the hub's address (an IP literal)")
    hub_fingerprints: list[Fingerprint] = Field(min_length=1, max_length=16)
    port: int | None = Field(default=None, ge=1, le=65535)
    enabled: bool = True
    comment: Comment


# --- enrollment tokens (a terminal enrolls itself) -------------------------------------------------------------

EnrollmentState = Literal["live", "used", "expired", "revoked"]


class EnrollmentTokenIn(In):
    name: Name = Field(description="the terminal's name, as it will be enrolled")
    prefixes: list[Cidr] = Field(min_length=1, max_length=64, description="the site's prefixes (clients' addresses)")
    expires_in_s: int = Field(default=86400, ge=60, le=7 * 86400, description="how long it may be redeemed")
    comment: Comment


class EnrollmentTokenOut(BaseModel):
    """An enrollment token as listed: never the token, never its hash."""

    id: int
    name: str
    prefixes: list[str]
    comment: str
    created_at: float
    created_by: str
    expires_at: float
    state: EnrollmentState
    used_at: float | None
    used_fingerprint: str | None = Field(description="the identity enrolled with it")
    used_version_id: int | None = Field(description="the config version that enrolled it")
    revoked_at: float | None
    revoked_by: str | None


class EnrollmentTokenCreated(EnrollmentTokenOut):
    token: str = Field(description="the token itself: shown this once (the hub keeps only its hash)")


class EnrollmentTokenList(BaseModel):
    tokens: list[EnrollmentTokenOut]


class EnrollIn(In):
    token: str = Field(max_length=256, description="the enrollment token (`pgt1.`…)")
    fingerprint: Fingerprint


class TerminalPeerOut(BaseModel):
    """The `peer` section a terminal needs to reach this hub."""

    enabled: bool
    port: int
    hub: str = Field(description="one hub gateway's peer address (an IP literal)")
    hub_fingerprints: list[str] = Field(description="the identity of every gateway of the hub's fleet")
    hub_cluster: bool = Field(description="the hub is more than one gateway")


class EnrollOut(BaseModel):
    name: str = Field(description="the terminal's name at the hub")
    prefixes: list[str]
    version_id: int = Field(description="the hub's config version that enrolled it")
    peer: TerminalPeerOut
    management_key: str = Field(
        description="the terminal's bearer secret to be managed from this hub (GET /managed/desired, POST "
        "/managed/report): shown this once, the hub keeps only its hash; enrolling again or revoking ends it"
    )
