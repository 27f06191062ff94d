"""SQLAlchemy ORM tables. Migrations live in api/alembic; `alembic check` keeps them in step."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from perigee_api.core.db import Base


class User(Base):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(16))
    must_change_password: Mapped[bool] = mapped_column(Boolean, default=False)
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[float] = mapped_column(Float)
    password_changed_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class BrowserSession(Base):
    __tablename__ = "sessions"
    # sha256 of the cookie value: a leaked database does not leak live sessions.
    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)
    address: Mapped[str] = mapped_column(String(64))


class ApiToken(Base):
    __tablename__ = "api_tokens"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(64))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    # read (GET only) | operator: the token acts with the lower of this and its owner's role.
    scope: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)
    last_used_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class LoginAttempt(Base):
    __tablename__ = "login_attempts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    ts: Mapped[float] = mapped_column(Float, index=True)
    username: Mapped[str] = mapped_column(String(64), index=True)
    address: Mapped[str] = mapped_column(String(64), index=True)
    success: Mapped[bool] = mapped_column(Boolean)


class AuditEntry(Base):
    __tablename__ = "audit_log"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    ts: Mapped[float] = mapped_column(Float, index=True)
    actor: Mapped[str] = mapped_column(String(64))
    address: Mapped[str] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(128))
    target: Mapped[str] = mapped_column(String(512))
    result: Mapped[str] = mapped_column(String(64))
    detail: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class ConfigVersion(Base):
    __tablename__ = "config_versions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    author: Mapped[str] = mapped_column(String(64))
    comment: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    # none | applied | failed
    apply_status: Mapped[str] = mapped_column(String(16), default="none")
    apply_result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    applied_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class BodProfile(Base):
    __tablename__ = "bod_profiles"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    inputs: Mapped[dict[str, Any]] = mapped_column(JSON)
    overrides: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class Meta(Base):
    """Small key/value state: active version, rollup watermarks."""

    __tablename__ = "meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class FlowRecord(Base):
    __tablename__ = "flows"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    gateway_id: Mapped[int] = mapped_column(Integer)
    client: Mapped[str] = mapped_column(String(64))
    client_ip: Mapped[str] = mapped_column(String(48), index=True)
    server: Mapped[str] = mapped_column(String(64))
    server_ip: Mapped[str] = mapped_column(String(48), index=True)
    family: Mapped[int] = mapped_column(Integer)
    flow_class: Mapped[str | None] = mapped_column("class", String(64), nullable=True, index=True)
    action: Mapped[str | None] = mapped_column(String(16), nullable=True, index=True)
    started_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float] = mapped_column(Float, index=True)
    end_reason: Mapped[str | None] = mapped_column(String(64), nullable=True)
    bytes_up: Mapped[int] = mapped_column(Integer)
    bytes_down: Mapped[int] = mapped_column(Integer)
    sat_srtt_us: Mapped[int | None] = mapped_column(Integer, nullable=True)
    legs: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # "direct" or "peer" (docs/splitter.md, the peer path); None for records from older gateways.
    path: Mapped[str | None] = mapped_column(String(8), nullable=True, index=True)
    # The client's remote site ("other": none configured covers it), who terminated the connection
    # ("splitter" or "squid"), and the DSCP of its re-originated leg; None from older gateways.
    site: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    relay: Mapped[str | None] = mapped_column(String(8), nullable=True)
    dscp: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # The satellite leg as the gateway reported it (perigee_control.reports.SatelliteLeg: cc, cc_reason, segments
    # sent and retransmitted, retransmit_pct); None from older gateways.
    satellite: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class Sample1s(Base):
    __tablename__ = "samples_1s"
    ts: Mapped[int] = mapped_column(Integer, primary_key=True)
    metric: Mapped[str] = mapped_column(String(32), primary_key=True)
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    avg: Mapped[float] = mapped_column(Float)
    max: Mapped[float] = mapped_column(Float)
    n: Mapped[int] = mapped_column(Integer)


class FleetGateway(Base):
    """A gateway on another host, managed over the control protocol with mutual TLS (services/fleet.py)."""

    __tablename__ = "gateways"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    host: Mapped[str] = mapped_column(String(255))
    port: Mapped[int] = mapped_column(Integer)
    # Where Prometheus scrapes its metrics (file-based service discovery), on the same host.
    metrics_port: Mapped[int] = mapped_column(Integer)
    cert_fingerprint: Mapped[str] = mapped_column(String(128))
    cert_not_after: Mapped[float] = mapped_column(Float)
    # The certificate's serial (hex), what its revocation names; None for one issued before revocation existed.
    cert_serial: Mapped[str | None] = mapped_column(String(40), nullable=True)
    created_at: Mapped[float] = mapped_column(Float)
    created_by: Mapped[str] = mapped_column(String(64))


class FleetRevocation(Base):
    """A certificate of the fleet CA revoked before its expiry: a removed gateway's, a renewed API client's.
    The revocation list (services/fleet_pki.py) is made from these; a row goes once the certificate expired."""

    __tablename__ = "fleet_revocations"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    serial: Mapped[str] = mapped_column(String(40), unique=True)
    subject: Mapped[str] = mapped_column(String(128))
    revoked_at: Mapped[float] = mapped_column(Float)
    not_after: Mapped[float] = mapped_column(Float)


class EnrollmentToken(Base):
    """A one-time enrollment token for a terminal (services/enrollment.py): the hub stores its hash, never the
    token; the terminal that presents it is enrolled with this name and these prefixes."""

    __tablename__ = "enrollment_tokens"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # sha256 of the token: a leaked database does not leak live tokens.
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(64))
    prefixes: Mapped[list[str]] = mapped_column(JSON)
    comment: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float] = mapped_column(Float)
    created_by: Mapped[str] = mapped_column(String(64))
    expires_at: Mapped[float] = mapped_column(Float)
    used_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    used_fingerprint: Mapped[str | None] = mapped_column(String(80), nullable=True)
    used_version_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    revoked_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    revoked_by: Mapped[str | None] = mapped_column(String(64), nullable=True)


class ManagedTerminal(Base):
    """At a hub: a terminal enrolled with a token, managed from here (services/managed_hub.py): the hash of its
    management key (None once revoked) and what its latest report said."""

    __tablename__ = "managed_terminals"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    # sha256 of the management key (256 random bits): a leaked database does not leak a live key.
    key_hash: Mapped[str | None] = mapped_column(String(64), unique=True, nullable=True)
    enrolled_at: Mapped[float] = mapped_column(Float)
    # Which enrollment of this name holds the key: bumped each time a key is granted. Versions belong to one.
    enrollment: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    last_report_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    revision: Mapped[str | None] = mapped_column(String(64), nullable=True)
    local_version_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    software: Mapped[str | None] = mapped_column(String(64), nullable=True)
    health_ok: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    problems: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    rx_bytes: Mapped[int | None] = mapped_column(Integer, nullable=True)
    tx_bytes: Mapped[int | None] = mapped_column(Integer, nullable=True)
    live_flows: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # The config the terminal last reported running: what a new version for it is validated against.
    last_config: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # Its latest per-site figures, as it reported them: [{name, rx_bytes, tx_bytes, live_flows}].
    sites: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)


class ManagedVersion(Base):
    """At a hub: config sections made for one managed terminal, and what the terminal reported of them."""

    __tablename__ = "managed_versions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    terminal_id: Mapped[int] = mapped_column(ForeignKey("managed_terminals.id", ondelete="CASCADE"), index=True)
    # The terminal's enrollment it was made for: only that enrollment's key ever gets it.
    enrollment: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    created_at: Mapped[float] = mapped_column(Float)
    created_by: Mapped[str] = mapped_column(String(64))
    comment: Mapped[str] = mapped_column(Text)
    sections: Mapped[dict[str, Any]] = mapped_column(JSON)
    # pending | applied | rolled_back | refused (the terminal's report) | cancelled | superseded (at the hub)
    state: Mapped[str] = mapped_column(String(16))
    # The terminal's error, or why it was cancelled or superseded.
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    reported_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    # First sent to the terminal (a pending version once sent can no longer be cancelled).
    delivered_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    # Cancelled or superseded at.
    ended_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class ManagedLink(Base):
    """At a terminal: the hub that manages it (one row, services/managed_terminal.py). The management key is
    write-only: no route returns it."""

    __tablename__ = "managed_link"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    hub_url: Mapped[str] = mapped_column(String(300))
    hub_pin: Mapped[str] = mapped_column(String(80))
    name: Mapped[str] = mapped_column(String(64))
    management_key: Mapped[str] = mapped_column(String(128))
    joined_at: Mapped[float] = mapped_column(Float)
    last_contact_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # The newest hub version seen, the outcome of applying it, and whether the hub has that outcome yet.
    hub_version_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    outcome: Mapped[str | None] = mapped_column(String(16), nullable=True)
    outcome_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    outcome_reported: Mapped[bool] = mapped_column(Boolean, default=True)


class Sample1m(Base):
    __tablename__ = "samples_1m"
    ts: Mapped[int] = mapped_column(Integer, primary_key=True)
    metric: Mapped[str] = mapped_column(String(32), primary_key=True)
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    avg: Mapped[float] = mapped_column(Float)
    max: Mapped[float] = mapped_column(Float)
    n: Mapped[int] = mapped_column(Integer)


class Sample1h(Base):
    __tablename__ = "samples_1h"
    ts: Mapped[int] = mapped_column(Integer, primary_key=True)
    metric: Mapped[str] = mapped_column(String(32), primary_key=True)
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    avg: Mapped[float] = mapped_column(Float)
    max: Mapped[float] = mapped_column(Float)
    n: Mapped[int] = mapped_column(Integer)


Index("ix_samples_1s_metric_ts", Sample1s.metric, Sample1s.ts)
Index("ix_samples_1m_metric_ts", Sample1m.metric, Sample1m.ts)
Index("ix_samples_1h_metric_ts", Sample1h.metric, Sample1h.ts)

SAMPLE_TABLES: dict[int, type[Sample1s] | type[Sample1m] | type[Sample1h]] = {
    1: Sample1s,
    60: Sample1m,
    3600: Sample1h,
}
