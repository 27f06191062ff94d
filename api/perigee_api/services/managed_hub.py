"""At a hub: terminals managed from here. A terminal enrolled with a token (services/enrollment.py) gets a
management key in the same answer, its bearer secret from then on: the hub keeps only its SHA-256 (the key is 256
random bits, so a fast hash is enough, as for enrollment tokens). With it the terminal long-polls for the versions
an operator makes for it (GET /api/v1/managed/desired) and reports what it did with each and how it runs
(POST /api/v1/managed/report). Revoking the terminal, or enrolling it again, ends its key.

A version holds whole managed sections (schemas/managed.py MANAGED_SECTIONS). It is validated before it is
stored: merged onto the config the terminal last reported running, as a whole config with the policy's rules; before
any report, each section against the gateway's generated models. Versions reach the terminal in the order they were
made, each once; its report moves a version from `pending` to `applied`, `rolled_back` or `refused`. Versions belong
to one enrollment, not to the name: services/managed_lifecycle.py sends, cancels and supersedes them.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import secrets
import time
from functools import cache
from typing import Annotated, Any

from pydantic import TypeAdapter, ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from perigee_api.core.context import AppContext
from perigee_api.core.errors import ApiError
from perigee_api.core.messages import headline, humanize
from perigee_api.models import ManagedTerminal, ManagedVersion
from perigee_api.schemas.gateway_config import GatewayConfig
from perigee_api.schemas.managed import MANAGED_SECTIONS, ManagedReport
from perigee_api.services import managed_lifecycle, terminals, versions

KEY_PREFIX = "pgm1."
KEY_BYTES = 32
MAX_KEY_CHARS = 128
# Every refusal of a management key says only this.
KEY_REFUSED = "the management key is not valid: this terminal is not managed by this hub (join it again)"


def new_key() -> str:
    return KEY_PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(KEY_BYTES)).rstrip(b"=").decode()


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _well_formed(key: str) -> bool:
    if not key.startswith(KEY_PREFIX) or len(key) > MAX_KEY_CHARS:
        return False
    body = key[len(KEY_PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except ValueError:
        return False
    return len(raw) == KEY_BYTES


# --- keys ------------------------------------------------------------------------------------------------------


def grant(db: Session, name: str, now: float | None = None) -> str:
    """A new management key for terminal `name` (enrolled now), a new enrollment: any earlier key of that name
    ends, and so does what its earlier incarnation reported; the versions still pending for it are superseded (they
    stay in the history, and the new enrollment never gets them). Caller commits."""
    now = time.time() if now is None else now
    key = new_key()
    row = db.scalar(select(ManagedTerminal).where(ManagedTerminal.name == name))
    if row is None:
        row = ManagedTerminal(name=name, enrolled_at=0.0, enrollment=1)
        db.add(row)
    else:
        managed_lifecycle.supersede(db, row, managed_lifecycle.SUPERSEDED_ENROLLED, now)
        row.enrollment += 1
    row.key_hash = key_hash(key)
    row.enrolled_at = now
    for f in ("last_report_at", "revision", "local_version_id", "software", "health_ok", "problems"):
        setattr(row, f, None)
    for f in ("rx_bytes", "tx_bytes", "live_flows", "last_config", "sites"):
        setattr(row, f, None)
    db.flush()
    return key


def revoke(db: Session, name: str) -> None:
    """The terminal's key ends and its pending versions are superseded (its row and versions stay, for the
    record). Caller commits."""
    row = db.scalar(select(ManagedTerminal).where(ManagedTerminal.name == name))
    if row is not None:
        managed_lifecycle.supersede(db, row, managed_lifecycle.SUPERSEDED_REVOKED)
        row.key_hash = None


def bearer(header: str) -> str:
    return header[7:].strip() if header[:7].lower() == "bearer " else ""


def authenticate(db: Session, key: str) -> ManagedTerminal | None:
    """The managed terminal whose key this is, while it is enrolled in the desired config; else None."""
    if not _well_formed(key):
        return None
    digest = key_hash(key)
    row = db.scalar(select(ManagedTerminal).where(ManagedTerminal.key_hash == digest))
    if row is None or row.key_hash is None or not hmac.compare_digest(row.key_hash, digest):
        return None
    config = versions.latest(db).config
    if not any(t["name"] == row.name for t in terminals.enrolled(config)):
        return None
    return row


def managed(db: Session, name: str) -> ManagedTerminal | None:
    row = db.scalar(select(ManagedTerminal).where(ManagedTerminal.name == name))
    return row if row is not None and row.key_hash is not None else None


# --- versions --------------------------------------------------------------------------------------------------


@cache
def _section(name: str) -> TypeAdapter[Any]:
    f = GatewayConfig.model_fields[name]
    assert f.annotation is not None
    if not f.metadata:
        return TypeAdapter(f.annotation)
    return TypeAdapter(Annotated[(f.annotation, *f.metadata)])  # type: ignore[arg-type]


def _refuse(exc: ValidationError, prefix: tuple[Any, ...] = ()) -> ApiError:
    errors = [dict(e, loc=("sections", *prefix, *e["loc"])) for e in exc.errors()]
    details = humanize(errors)
    return ApiError(422, "invalid_sections", headline(details), details[0]["field"] if details else "sections", details)


def check_sections(row: ManagedTerminal, sections: dict[str, Any]) -> dict[str, Any]:
    """The sections as they will be sent (canonical JSON), or ApiError 422: not a managed section, or invalid
    merged onto the config the terminal last reported (with the policy's rules), or on its own before a report."""
    if not sections:
        raise ApiError(422, "no_sections", "a version sets at least one section", "sections")
    unknown = sorted(set(sections) - set(MANAGED_SECTIONS))
    if unknown:
        raise ApiError(
            422,
            "not_a_managed_section",
            f"{', '.join(unknown)}: not a section the hub sets (only {', '.join(MANAGED_SECTIONS)})",
            f"sections.{unknown[0]}",
        )
    if row.last_config is not None:
        merged = copy.deepcopy(row.last_config) | copy.deepcopy(sections)
        try:
            config = GatewayConfig.model_validate(merged)
        except ValidationError as exc:
            raise _refuse(exc) from None
        errors, warnings = versions.policy_errors(config)
        if errors:
            issues = versions.issues_json(errors + warnings)
            raise ApiError(422, errors[0].code, errors[0].message, "sections.classes", {"issues": issues})
        data = config.to_json()
        return {k: data[k] for k in sections}
    out: dict[str, Any] = {}
    for name, value in sections.items():
        adapter = _section(name)
        try:
            out[name] = adapter.dump_python(adapter.validate_python(value), mode="json", by_alias=True)
        except ValidationError as exc:
            raise _refuse(exc, (name,)) from None
    return out


def create_version(
    db: Session, row: ManagedTerminal, author: str, sections: dict[str, Any], comment: str
) -> ManagedVersion:
    """A new pending version for `row`, validated first (nothing stored when it is not). Caller commits, then
    wakes the terminal's long poll (`wake`)."""
    checked = check_sections(row, sections)
    v = ManagedVersion(
        terminal_id=row.id,
        enrollment=row.enrollment,
        created_at=time.time(),
        created_by=author,
        comment=comment,
        sections=checked,
        state="pending",
    )
    db.add(v)
    db.flush()
    return v


def wake(ctx: AppContext, row: ManagedTerminal) -> None:
    """Wakes the long poll of this terminal only (keyed by its id: routes/managed.py)."""
    ctx.managed_versions.wake(row.id)


def version_out(v: ManagedVersion, name: str) -> dict[str, Any]:
    return {
        "id": v.id,
        "terminal": name,
        "created_at": v.created_at,
        "created_by": v.created_by,
        "comment": v.comment,
        "sections": sorted(v.sections),
        "state": v.state,
        "error": v.error,
        "reported_at": v.reported_at,
        "enrollment": v.enrollment,
        "delivered_at": v.delivered_at,
        "ended_at": v.ended_at,
    }


def listed(db: Session, row: ManagedTerminal) -> list[ManagedVersion]:
    return list(
        db.scalars(
            select(ManagedVersion).where(ManagedVersion.terminal_id == row.id).order_by(ManagedVersion.id.desc())
        )
    )


# --- reports ---------------------------------------------------------------------------------------------------


def report(db: Session, row: ManagedTerminal, body: ManagedReport, now: float | None = None) -> ManagedVersion | None:
    """Records a terminal's report; the version whose state it changed, if any. Caller commits."""
    now = time.time() if now is None else now
    row.last_report_at = now
    row.revision = body.revision
    row.local_version_id = body.local_version_id
    row.software = body.software
    row.health_ok = body.health_ok
    row.problems = list(body.problems)
    row.rx_bytes, row.tx_bytes, row.live_flows = body.rx_bytes, body.tx_bytes, body.live_flows
    row.sites = [s.model_dump(mode="json") for s in body.sites]
    if body.config is not None:
        try:  # kept only as the gateway would take it: what new versions are checked against
            row.last_config = GatewayConfig.model_validate(body.config).to_json()
        except ValidationError:
            row.last_config = None
    if body.version_id is None or body.outcome == "none":
        return None
    v = db.get(ManagedVersion, body.version_id)
    if v is None or v.terminal_id != row.id or v.enrollment != row.enrollment or v.state != "pending":
        return None  # not this enrollment's version, or reported, cancelled or superseded already: nothing changes
    v.state = body.outcome
    v.error = body.error if body.outcome != "applied" else None
    v.reported_at = now
    return v


# --- what the hub shows ----------------------------------------------------------------------------------------


def detail(ctx: AppContext, db: Session, name: str) -> dict[str, Any]:
    listing = terminals.status(ctx, db)
    terminal = next((t for t in listing["terminals"] if t["name"] == name), None)
    if terminal is None:
        raise ApiError(404, "terminal_not_found", f"no terminal named '{name}' is enrolled", "name")
    row = managed(db, name)
    newest = listed(db, row)[:1] if row is not None else []
    applied = (
        db.scalar(
            select(ManagedVersion.id)
            .where(ManagedVersion.terminal_id == row.id, ManagedVersion.state == "applied")
            .order_by(ManagedVersion.id.desc())
            .limit(1)
        )
        if row is not None
        else None
    )
    return {
        "terminal": terminal,
        "managed": row is not None,
        "last_report_at": row.last_report_at if row else None,
        "revision": row.revision if row else None,
        "local_version_id": row.local_version_id if row else None,
        "software": row.software if row else None,
        "health_ok": row.health_ok if row else None,
        "problems": list(row.problems or []) if row else [],
        "rx_bytes": row.rx_bytes if row else None,
        "tx_bytes": row.tx_bytes if row else None,
        "live_flows": row.live_flows if row else None,
        "sites": list(row.sites or []) if row else [],
        "enrollment": row.enrollment if row else None,
        "desired_version": version_out(newest[0], name) if newest else None,
        "applied_version_id": applied,
    }
