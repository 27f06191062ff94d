"""Health, versions, cache passthrough, backup/restore, audit log."""

from __future__ import annotations

import json
import platform
import re
import time
from pathlib import Path
from typing import Any

from fastapi import APIRouter, File, Query, Request, UploadFile
from pydantic import ValidationError
from sqlalchemy import func, select

from perigee_api import __version__
from perigee_api.api.deps import Admin, Ctx, Db, Gateway, Operator, Viewer, audit_info
from perigee_api.core.errors import ApiError, ErrorResponse, validation_details
from perigee_api.models import AuditEntry
from perigee_api.schemas.api import (
    AuditOut,
    AuditPage,
    CacheStats,
    DnsFlushIn,
    DnsFlushOut,
    DnsReport,
    HealthOut,
    InterfaceList,
    PurgeIn,
    PurgeResponse,
    RestoreOut,
    TlsIn,
    TlsOut,
    VersionsOut,
)
from perigee_api.services import audit
from perigee_api.services import backup as backup_service
from perigee_api.services import tls as tls_service
from perigee_control.client import GatewayError
from perigee_control.reports import Health

router = APIRouter(tags=["system"], responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}})

SAFE_UPLOAD_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\.json$")


@router.get("/health", response_model=HealthOut, summary="API health, gateway reachability and its health")
def health(ctx: Ctx, db: Db) -> HealthOut:
    problems: list[str] = []
    api: dict[str, Any] = {"status": "ok", "version": __version__, "uptime_s": time.time() - ctx.started_at}
    try:
        db.execute(select(1))
    except Exception as exc:  # any database failure is a health problem, reported not raised
        problems.append(f"database: {exc}")
        api["status"] = "degraded"
    if ctx.collector is not None:
        api["collector"] = {"ticks": ctx.collector.ticks, "last_error": ctx.collector.last_error}
    gw_health: Health | None = None
    reachable = False
    try:
        gw_health = ctx.gateway.health()
        reachable = True
        if gw_health.status != "ok":
            problems += [f"gateway: {p}" for p in gw_health.problems] or ["gateway: degraded"]
    except GatewayError as exc:
        problems.append(f"gateway unreachable: {exc.message}")
    status = "ok" if not problems else "degraded"
    return HealthOut(status=status, api=api, gateway_reachable=reachable, gateway=gw_health, problems=problems)


@router.get("/system/versions", response_model=VersionsOut)
def system_versions(who: Viewer, db: Db, gw: Gateway) -> VersionsOut:
    from sqlalchemy import text

    rev = db.scalar(text("SELECT version_num FROM alembic_version"))
    try:
        gwv = gw.health().version
    except GatewayError:
        gwv = None
    return VersionsOut(api=__version__, python=platform.python_version(), schema_revision=rev, gateway=gwv)


@router.get(
    "/system/interfaces",
    response_model=InterfaceList,
    responses={502: {"model": ErrorResponse}},
    summary="The gateway's network interfaces: addresses, state, MTU, what the running config uses them for",
)
def system_interfaces(who: Viewer, gw: Gateway) -> dict[str, Any]:
    return gw.json.interfaces()


@router.get("/cache/stats", response_model=CacheStats, summary="Cache counters (gateway passthrough)")
def cache_stats(who: Viewer, gw: Gateway) -> dict[str, Any]:
    return gw.json.cache_stats()


@router.post("/cache/purge", response_model=PurgeResponse, summary="Purge one URL or everything (gateway passthrough)")
def cache_purge(body: PurgeIn, who: Operator, gw: Gateway, request: Request) -> dict[str, Any]:
    if body.all == (body.url is not None):
        raise ApiError(422, "purge_target", "give exactly one of url or all=true", "url")
    audit_info(request, url=body.url, all=body.all)
    return gw.json.cache_purge(url=body.url, purge_all=body.all)


@router.get(
    "/dns/stats",
    response_model=DnsReport,
    summary="Resolver counters: queries, hit ratio, stale answers, time saved (gateway passthrough)",
)
def dns_stats(who: Viewer, gw: Gateway) -> dict[str, Any]:
    return gw.json.dns_stats()


@router.post(
    "/dns/flush", response_model=DnsFlushOut, summary="Flush one name or the whole resolver cache (gateway passthrough)"
)
def dns_flush(body: DnsFlushIn, who: Operator, gw: Gateway, request: Request) -> dict[str, Any]:
    if body.all == (body.name is not None):
        raise ApiError(422, "flush_target", "give exactly one of name or all=true", "name")
    audit_info(request, name=body.name, all=body.all)
    return gw.json.dns_flush(name=body.name, flush_all=body.all)


@router.get("/system/backup", summary="Config versions, users (argon2 hashes only) and BoD profiles as JSON")
def backup(who: Admin, db: Db) -> dict[str, Any]:
    data = backup_service.make_backup(db)
    # A read, but one that exports password hashes: audited explicitly.
    audit.record(db, actor=who.name, address=who.address, action="GET /api/v1/system/backup", target="backup")
    db.commit()
    return data


@router.post(
    "/system/restore",
    response_model=RestoreOut,
    responses={413: {"model": ErrorResponse}, 422: {"model": ErrorResponse}},
    summary="Restore a backup file: validated entirely, then written in one transaction",
)
async def restore(
    who: Admin, ctx: Ctx, request: Request, file: UploadFile = File(description="a perigee backup .json")
) -> RestoreOut:
    name = file.filename or ""
    if not SAFE_UPLOAD_NAME.fullmatch(name) or ".." in name:
        raise ApiError(422, "bad_filename", f"file: '{name[:80]}' is not a plain name ending in .json", "file")
    raw = await file.read(ctx.settings.max_restore_bytes + 1)
    if len(raw) > ctx.settings.max_restore_bytes:
        raise ApiError(413, "payload_too_large", f"backup over {ctx.settings.max_restore_bytes} bytes", "file")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(422, "bad_json", f"file: not valid JSON ({exc})", "file") from None
    except RecursionError:
        raise ApiError(422, "bad_json", "file: JSON nested too deeply to be a backup", "file") from None
    try:
        parsed = backup_service.Backup.model_validate(data)
    except RecursionError:
        raise ApiError(422, "invalid_backup", "file: JSON nested too deeply to be a backup", "file") from None
    except ValidationError as exc:
        details = validation_details(list(exc.errors()))
        first = details[0]
        raise ApiError(
            422,
            "invalid_backup",
            f"file.{first['field']}: {first['message']}",
            f"file.{first['field']}",
            details,
        ) from None

    def write() -> None:
        with ctx.db.session() as db:
            backup_service.restore(db, parsed)
            db.commit()

    from starlette.concurrency import run_in_threadpool

    await run_in_threadpool(write)
    audit_info(request, users=len(parsed.users), versions=len(parsed.versions))
    return RestoreOut(
        ok=True, users=len(parsed.users), versions=len(parsed.versions), bod_profiles=len(parsed.bod_profiles)
    )


@router.get("/audit", response_model=AuditPage, summary="Audit log, newest first")
def audit_log(
    who: Admin,
    db: Db,
    actor: str | None = Query(default=None, max_length=64),
    action: str | None = Query(default=None, max_length=128, description="substring"),
    since: float | None = Query(default=None, ge=0, le=1e11),
    limit: int = Query(default=100, ge=1, le=1000),
    offset: int = Query(default=0, ge=0, le=10_000_000),
) -> AuditPage:
    conds = []
    if actor:
        conds.append(AuditEntry.actor == actor)
    if action:
        conds.append(AuditEntry.action.contains(action))
    if since is not None:
        conds.append(AuditEntry.ts >= since)
    total = db.scalar(select(func.count()).select_from(AuditEntry).where(*conds)) or 0
    rows = db.scalars(select(AuditEntry).where(*conds).order_by(AuditEntry.id.desc()).limit(limit).offset(offset))
    return AuditPage(
        entries=[AuditOut.model_validate(r, from_attributes=True) for r in rows],
        total=total,
        limit=limit,
        offset=offset,
    )


def _tls_status(tls_dir: Path) -> TlsOut:
    return TlsOut.model_validate(
        {
            "certificate": tls_service.describe(tls_dir),
            "reload": tls_service.reload_state(tls_dir),
            "backup_available": tls_service.backup_available(tls_dir),
        }
    )


@router.get("/system/tls", response_model=TlsOut, summary="nginx's current TLS certificate and its last reload")
def tls_get(who: Viewer, ctx: Ctx) -> TlsOut:
    return _tls_status(ctx.settings.tls_dir)


@router.put(
    "/system/tls",
    response_model=TlsOut,
    responses={413: {"model": ErrorResponse}, 422: {"model": ErrorResponse}, 500: {"model": ErrorResponse}},
    summary="Upload a certificate chain and its key: validated, written atomically, nginx reloads it",
)
def tls_put(body: TlsIn, who: Admin, ctx: Ctx, request: Request) -> TlsOut:
    limit = ctx.settings.max_tls_pem_bytes
    for field, text in (("certificate", body.certificate), ("private_key", body.private_key)):
        if len(text.encode()) > limit:
            raise ApiError(413, "payload_too_large", f"{field}: over {limit} bytes", field)
    try:
        pair = tls_service.validate(body.certificate, body.private_key)
    except tls_service.TlsInputError as exc:
        raise ApiError(422, "invalid_tls", exc.message, exc.field) from None
    tls_dir = ctx.settings.tls_dir
    try:
        backed_up = tls_service.install(tls_dir, pair, who.name)
    except OSError as exc:
        # Only the directory's setup can cause this (missing, not writable by the API's user).
        raise ApiError(500, "tls_write_failed", f"cannot write to {tls_dir}: {exc.strerror or exc}") from None
    audit_info(request, fingerprint=pair.fingerprint, subject=pair.chain[0].subject.rfc4514_string(), backup=backed_up)
    return _tls_status(tls_dir)
