"""Request and response models of the HTTP API (pydantic v2).

Request models are strict: unknown fields are rejected, and JSON types are taken as they are (no "5" or true
for an integer, no 1 for a boolean); numbers must be finite.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ModelWrapValidatorHandler, PrivateAttr, model_validator

from perigee_api.schemas.gateway_config import (
    FACTORY_REVISION,
    Action,
    BypassProtocol,
    BypassRule,
    Cidr,
    ClassSatellite,
    GatewayConfig,
    Match,
    Name,
    PortSpec,
    TrafficClass,
)
from perigee_api.tuning import BodInputs, Tuning
from perigee_control.limits import bound
from perigee_control.reports import (
    BypassRuleKind,
    CacheStats,
    CcReason,
    DnsReport,
    Flow,
    FlowPath,
    Health,
    InterfaceList,
    PeerCounters,
    PurgeResponse,
    Relay,
    RoutingReport,
    SatelliteLeg,
)

Role = Literal["admin", "operator", "viewer"]
Username = str


class In(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


# --- auth ---------------------------------------------------------------------------------------


class CsrfOut(BaseModel):
    csrf_token: str


class LoginIn(In):
    username: str = Field(min_length=1, max_length=64)
    password: str = Field(min_length=1, max_length=256)


class UserOut(BaseModel):
    id: int
    username: str
    role: Role
    must_change_password: bool
    disabled: bool
    created_at: float


class LoginOut(BaseModel):
    user: UserOut
    csrf_token: str
    must_change_password: bool


class ChangePasswordIn(In):
    current_password: str = Field(min_length=1, max_length=256)
    new_password: str = Field(min_length=12, max_length=256)


class OkOut(BaseModel):
    ok: bool = True


class UserCreate(In):
    username: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
    role: Role
    password: str | None = Field(
        default=None, min_length=12, max_length=256, description="omit for a generated one-time password"
    )


class UserCreated(BaseModel):
    user: UserOut
    one_time_password: str | None = None


class UserUpdate(In):
    role: Role | None = None
    disabled: bool | None = None
    reset_password: bool = Field(default=False, description="issue a new one-time password")


TokenScope = Literal["read", "operator"]


class TokenCreate(In):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,63}$")
    scope: TokenScope = Field(
        default="read",
        description="read: GET requests only; operator: also the operator's writes. Never more than the owner's role, "
        "never admin",
    )
    expires_in_days: int | None = Field(
        default=None, ge=1, le=3650, description="lifetime in days (default 90, at most the server's maximum, 365)"
    )


class TokenOut(BaseModel):
    id: int
    name: str
    prefix: str
    user_id: int
    username: str
    scope: TokenScope
    created_at: float
    expires_at: float
    last_used_at: float | None


class TokenCreated(BaseModel):
    token: TokenOut
    secret: str = Field(description="shown once; send as 'Authorization: Bearer <secret>'")


# --- policy -------------------------------------------------------------------------------------


class PolicyIssue(BaseModel):
    severity: Literal["error", "warning"]
    code: str
    message: str
    classes: list[str]


# The gateway's own bounds on what these requests carry into its config (the schema's, never restated).
PRIORITY_MIN: int = bound(TrafficClass, "priority", "ge")
PRIORITY_MAX: int = bound(TrafficClass, "priority", "le")
BYPASS_CIDRS_MAX: int = bound(BypassRule, "cidrs", "max_length")
BYPASS_PORTS_MAX: int = bound(BypassRule, "ports", "max_length")


class ClassIn(In):
    name: Name
    priority: int = Field(ge=PRIORITY_MIN, le=PRIORITY_MAX)
    match: Match = Field(default_factory=Match)
    action: Action
    satellite: ClassSatellite = Field(default_factory=ClassSatellite)
    comment: str = Field(default="", max_length=1000)


class ClassPatch(In):
    name: Name | None = Field(default=None, description="a new name for the class (renames it)")
    priority: int | None = Field(default=None, ge=PRIORITY_MIN, le=PRIORITY_MAX)
    match: Match | None = None
    action: Action | None = None
    satellite: ClassSatellite | None = None
    comment: str = Field(default="", max_length=1000)


class ClassesOut(BaseModel):
    classes: list[TrafficClass]
    issues: list[PolicyIssue]
    version_id: int


class DiffEntry(BaseModel):
    path: str
    op: Literal["added", "removed", "changed"]
    old: Any = None
    new: Any = None


class ChangeOut(BaseModel):
    version_id: int = Field(
        description="the new version; when nothing changed, or for a preview, the version the change started from"
    )
    issues: list[PolicyIssue]
    changed: bool = Field(
        default=True,
        description="false: the change changed nothing, so no version was made (version_id is the one it started from)",
    )
    base_version_id: int | None = Field(
        default=None, description="the version the change started from (base=desired: the latest; running: what runs)"
    )
    changes: list[DiffEntry] = Field(default=[], description="what the change changes in that version")
    preview: bool = Field(default=False, description="true: nothing was stored (preview=true)")


class BypassIn(In):
    name: Name
    protocol: BypassProtocol
    cidrs: list[Cidr] = Field(default_factory=list, max_length=BYPASS_CIDRS_MAX)
    ports: list[PortSpec] = Field(default_factory=list, max_length=BYPASS_PORTS_MAX)
    comment: str = Field(default="", max_length=1000)
    confirm: bool = Field(
        default=False,
        description="store the rule although it is risky (bypasses most served traffic, duplicates a rule, gives a "
        "host as a network); without it such a rule is answered 409 confirm_required with the risks in details",
    )
    _raw_cidrs: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_raw_cidrs(cls, data: Any, handler: ModelWrapValidatorHandler[BypassIn]) -> BypassIn:
        # The CIDR type clears host bits; the risk check needs what was typed to name "198.51.100.5/24".
        model = handler(data)
        raw = data.get("cidrs") if isinstance(data, dict) else None
        model._raw_cidrs = [c for c in raw if isinstance(c, str)] if isinstance(raw, list) else []
        return model

    @property
    def raw_cidrs(self) -> list[str]:
        return self._raw_cidrs


class BypassOut(BaseModel):
    rule: BypassRule
    enabled: bool
    protected: bool


class BypassListOut(BaseModel):
    rules: list[BypassOut]
    version_id: int


# --- BoD ----------------------------------------------------------------------------------------


class BodProfileIn(In):
    name: Name
    inputs: BodInputs
    overrides: dict[str, float] = Field(default_factory=dict)


class BodProfileOut(BaseModel):
    id: int
    name: str
    inputs: BodInputs
    overrides: dict[str, float]
    tuning: Tuning | None = Field(description="null when the stored inputs are no longer valid (see problem)")
    problem: str | None = Field(
        default=None, description="why a stored profile cannot be derived (saved under older rules): fix or delete it"
    )
    created_at: float
    updated_at: float


class BodApplyIn(In):
    comment: str = Field(default="", max_length=1000)
    confirm: bool = Field(
        default=False,
        description="write although the inputs are outside the link's physics (the derive answer's link_risks); "
        "without it such a profile is answered 409 confirm_required with the risks in details",
    )


class BodDeriveOut(Tuning):
    """A derivation, and what writing it into the desired config would meet."""

    config_problems: list[str] = Field(
        description="why the desired config would refuse it (write to config is refused while there are any)"
    )
    link_risks: list[str] = Field(description="inputs outside the link's physics, to confirm before writing")
    config_changes: list[DiffEntry] = Field(description="what writing it would change in the desired config")


# --- config versions ----------------------------------------------------------------------------


class VersionSummary(BaseModel):
    id: int
    author: str
    comment: str
    created_at: float
    apply_status: Literal["none", "applied", "failed"]
    applied_at: float | None
    active: bool


class VersionOut(VersionSummary):
    config: GatewayConfig
    apply_result: dict[str, Any] | None


class VersionList(BaseModel):
    versions: list[VersionSummary]
    total: int
    active_version_id: int | None
    latest_version_id: int | None


class ConfigPut(In):
    config: GatewayConfig
    comment: str = Field(default="", max_length=1000)


class PreviewOut(BaseModel):
    """What saving a config would change in the desired (latest) version; nothing is stored."""

    base_version_id: int | None
    changes: list[DiffEntry]
    issues: list[PolicyIssue]


class DiffOut(BaseModel):
    a: int
    b: int
    changes: list[DiffEntry]


class RunningOut(BaseModel):
    """What the gateway runs, and how it differs from the desired (latest) version."""

    reachable: bool
    revision: str | None = Field(
        description="the revision the gateway runs; null when it runs no config or cannot be asked"
    )
    config: GatewayConfig | None = Field(description="the config it runs (null: none, or it cannot be asked)")
    version_id: int | None = Field(description="the version that config is (imported when it was none the API knew)")
    desired_version_id: int | None
    in_sync: bool = Field(description="the gateway runs the desired version")
    changes: list[DiffEntry] = Field(description="what applying the desired version would change in what runs")
    checked_at: float = Field(description="when the gateway was last asked (unix s)")
    error: str | None
    needs_setup: bool = Field(
        description="the box still needs its setup: the gateway runs no config, or the factory config (revision "
        f"'{FACTORY_REVISION}' with the factory content) unchanged; false when it cannot be asked"
    )


class ValidateOut(BaseModel):
    ok: bool = Field(description="the gateway would install this version as it is")
    version_id: int
    rendered: dict[str, Any] | None
    error: dict[str, Any] | None
    issues: list[PolicyIssue] = Field(
        default_factory=list, description="the policy check's warnings about this version (it is accepted with them)"
    )


class GatewayApplyOut(BaseModel):
    """One fleet member's part of an apply: applied | failed | rolled_back | rollback_failed | not_attempted |
    refused (its dry run refused the config) | unreachable."""

    gateway: str
    address: str
    status: str
    revision: str | None
    error: dict[str, Any] | None
    rollback_error: dict[str, Any] | None
    persisted: bool | None = Field(
        default=None,
        description="Whether the gateway wrote the config it runs after this apply (or its rollback) to its config "
        "file, which it boots at its next start. False: a restart brings back its older config (persist_error says "
        "why). Null: not applied, or a gateway too old to say.",
    )
    persist_error: str | None = None


class ApplyOut(BaseModel):
    ok: bool
    version_id: int
    active_version_id: int | None
    revision: str | None = None
    error: dict[str, Any] | None
    gateways: list[GatewayApplyOut] = []


class RollbackOut(BaseModel):
    new_version_id: int
    apply: ApplyOut


class CommentIn(In):
    comment: str = Field(default="", max_length=1000)


# --- flows and stats ----------------------------------------------------------------------------


class LiveFlowsOut(BaseModel):
    flows: list[Flow]
    now: float
    count: int
    fetched_at: float
    error: str | None


FLOWS_EVENT = "flows"


class FlowsEvent(BaseModel):
    """The live stream's one event (`event: flows`, GET /flows/stream): the whole live table, once per collector
    tick in which it changed."""

    # The SSE event name, in the OpenAPI document too: the dashboard listens for this name only.
    model_config = ConfigDict(json_schema_extra={"x-sse-event": FLOWS_EVENT})

    flows: list[Flow]
    now: float = Field(description="the gateway's clock when the table was read (Unix s)")
    seq: int = Field(description="the collector tick it is from; also the event's SSE id")
    error: str | None = Field(description="why the last read of the gateway failed (the table is then the last one)")


class FlowRecordOut(BaseModel):
    id: int
    gateway_id: int
    client: str
    server: str
    family: int
    flow_class: str | None = Field(serialization_alias="class")
    action: str | None
    started_at: float
    ended_at: float
    end_reason: str | None
    bytes_up: int = Field(description="bytes that crossed the satellite toward the server (delivered)")
    bytes_down: int = Field(description="bytes that crossed the satellite toward the client (delivered)")
    sat_srtt_us: int | None
    path: FlowPath | None
    site: str | None = None
    relay: Relay | None = None
    dscp: int | None = None
    satellite: SatelliteLeg | None = Field(
        default=None,
        description="the satellite leg at the flow's end: its congestion control and why, segments sent and "
        "retransmitted; null from a gateway that does not report it",
    )


class FlowPage(BaseModel):
    flows: list[FlowRecordOut]
    total: int
    limit: int
    offset: int


class SiteNow(BaseModel):
    site: str
    prefixes: list[str]
    down_bps: float = Field(description="satellite payload toward the site's clients, last second")
    up_bps: float
    flows: int = Field(description="live flows")
    rtt_ms: float | None = Field(description="mean smoothed RTT of the live flows' satellite legs")
    retrans_ps: float = Field(description="satellite segments retransmitted per second")
    cache_saved_bps: float = Field(
        description="what the cache served the site's clients from its store: at a terminal satellite capacity "
        "saved, at a hub terrestrial backhaul saved (the bytes still cross the satellite)"
    )


class SitesOut(BaseModel):
    sites: list[SiteNow]
    updated_at: float | None


class TopTalker(BaseModel):
    key: str = Field(description="the site, or the client address")
    site: str | None
    bytes_down: int
    bytes_up: int
    flows: int


class TopTalkersOut(BaseModel):
    by: Literal["site", "client"]
    start: int
    end: int
    talkers: list[TopTalker]


class SatelliteCcCount(BaseModel):
    key: str = Field(
        description="the congestion control, or the reason the leg runs it (default, class, fallback, automatic)"
    )
    flows: int = Field(
        description="split flows since the gateway started (a flow switched automatically counts "
        "under both congestion controls)"
    )
    segments: int = Field(description="satellite-leg data segments sent, retransmissions included")
    retrans_segments: int
    retransmit_pct: float | None = Field(description="retrans_segments / segments × 100; null before any was sent")


class LiveCcSplit(BaseModel):
    cc: str
    cc_reason: CcReason
    flows: int = Field(description="live flows whose satellite leg runs `cc` for this reason")


class SatelliteStatsOut(BaseModel):
    live: list[LiveCcSplit]
    by_congestion_control: list[SatelliteCcCount]
    by_cc_reason: list[SatelliteCcCount]
    peer: PeerCounters | None = Field(
        default=None,
        description="The peer path since the gateway started: flows, fallbacks, refusals, failures and the first "
        "bytes it sent twice (peer.redundancy); null before the collector's first reading",
    )
    updated_at: float | None


class BypassRuleCount(BaseModel):
    name: str
    kind: BypassRuleKind = Field(description="a bypass entry, or a class whose action is bypass")
    builtin: bool
    packets: int
    bytes: int


class BypassCountsOut(BaseModel):
    rules: list[BypassRuleCount]
    updated_at: float | None


class SeriesPoint(BaseModel):
    ts: int
    avg: float
    max: float


class Series(BaseModel):
    key: str
    points: list[SeriesPoint]


class SeriesOut(BaseModel):
    metric: str
    resolution_s: int
    step_s: int
    start: int
    end: int
    series: list[Series]


# --- cache / system -----------------------------------------------------------------------------


class PurgeIn(In):
    url: str | None = Field(default=None, min_length=1, max_length=4096, pattern=r"^https?://\S+$")
    all: bool = False


class DnsFlushIn(In):
    """One name (and everything below it) or the whole resolver cache."""

    name: str | None = Field(
        default=None,
        min_length=1,
        max_length=254,
        pattern=r"^[A-Za-z0-9_-]{1,63}(\.[A-Za-z0-9_-]{1,63})*\.?$",
    )
    all: bool = False


class HealthOut(BaseModel):
    status: Literal["ok", "degraded"]
    api: dict[str, Any]
    gateway_reachable: bool
    gateway: Health | None = Field(description="the gateway's own health (control protocol), null when unreachable")
    problems: list[str]


class DnsFlushOut(BaseModel):
    ok: bool


__all__ = ["CacheStats", "DnsReport", "Flow", "Health", "InterfaceList", "PurgeResponse"]


class VersionsOut(BaseModel):
    api: str
    python: str
    schema_revision: str | None
    gateway: str | None


class AuditOut(BaseModel):
    id: int
    ts: float
    actor: str
    address: str
    action: str
    description: str = Field(default="", description="the action in an operator's words")
    target: str
    result: str
    detail: dict[str, Any] | None


class AuditPage(BaseModel):
    entries: list[AuditOut]
    total: int
    limit: int
    offset: int


class RestoreOut(BaseModel):
    ok: bool
    users: int
    versions: int
    bod_profiles: int


# --- TLS certificate (nginx) ----------------------------------------------------------------------
class TlsIn(In):
    certificate: str = Field(description="PEM certificate chain, the server's certificate first")
    private_key: str = Field(description="PEM private key (unencrypted): RSA 2048+ or EC P-256/P-384")


class TlsCertificateOut(BaseModel):
    subject: str
    issuer: str
    sans: list[str] = Field(description="subject alternative names: DNS:name, IP:address")
    not_before: float = Field(description="Unix seconds")
    not_after: float = Field(description="Unix seconds")
    fingerprint_sha256: str
    spki_pin: str = Field(
        description="sha256: and the hex of the certificate's SubjectPublicKeyInfo digest: the pin a terminal "
        "gives to join this hub (it survives a renewal with the same key)"
    )
    key_type: str
    chain_length: int
    self_signed: bool
    source: Literal["uploaded", "generated"] = Field(description="uploaded through the API, or made at first start")
    uploaded_by: str | None
    uploaded_at: float | None


class TlsReloadOut(BaseModel):
    state: Literal["none", "pending", "ok", "failed"]
    message: str | None
    at: float | None


class TlsOut(BaseModel):
    certificate: TlsCertificateOut | None = Field(description="null while nginx has made no certificate yet")
    reload: TlsReloadOut
    backup_available: bool


# --- fleet --------------------------------------------------------------------------------------


class GatewayRegisterIn(In):
    name: str = Field(min_length=1, max_length=64, description="lowercase letters, digits, '-'; not 'local'")
    address: str = Field(min_length=3, max_length=300, description="host:port of its TLS control listener")
    metrics_port: int = Field(default=9464, ge=1, le=65535, description="its Prometheus listener, same host")


class FleetGatewayOut(BaseModel):
    id: int
    name: str
    address: str
    metrics_port: int
    cert_fingerprint: str
    cert_not_after: float
    created_at: float
    created_by: str


class GatewayCredentials(BaseModel):
    """What the gateway's TLS listener needs (--control-tls-ca/-cert/-key). The key is not kept: this is the only
    time it is shown."""

    ca_pem: str
    cert_pem: str
    key_pem: str


class GatewayRegistered(BaseModel):
    gateway: FleetGatewayOut
    credentials: GatewayCredentials


class FleetGatewayList(BaseModel):
    gateways: list[FleetGatewayOut]


class FleetMemberOut(BaseModel):
    gateway: str
    address: str
    reachable: bool
    status: str
    revision: str | None
    version: str | None
    uptime_s: float | None
    flows_live: int | None
    throughput_down_bps: float | None
    throughput_up_bps: float | None
    problems: list[str]
    error: dict[str, Any] | None
    routing: RoutingReport | None = Field(
        description="its BGP sessions and their BFD state (GET /v1/routing); `available` false on a gateway without "
        "FRR; null when it did not answer"
    )
    routing_error: dict[str, Any] | None = Field(
        description="why a reachable gateway's routing report could not be read (an older daemon without the route)"
    )


class FleetStatusOut(BaseModel):
    gateways: list[FleetMemberOut]
    active_version_id: int | None
    active_revision: str | None


class FleetFlowsOut(BaseModel):
    flows: list[dict[str, Any]]
    errors: list[dict[str, Any]]


BodDeriveOut.model_rebuild()
