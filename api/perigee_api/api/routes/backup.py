"""Backup (config versions, users, BoD profiles as one JSON file) and restore of such a file."""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import APIRouter, File, Request, UploadFile
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from perigee_api.api.deps import Admin, Ctx, Db, audit_info
from perigee_api.core.errors import ApiError, ErrorResponse, validation_details
from perigee_api.schemas.api import RestoreOut
from perigee_api.services import audit
from perigee_api.services import backup as backup_service

router = APIRouter(tags=["system"], responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}})

SAFE_UPLOAD_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\.json$")


@router.get(
    "/system/backup",
    summary="Config versions (secrets as fingerprints), users (argon2 hashes only) and BoD profiles as JSON",
)
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

    def secrets_back() -> Any:
        with ctx.db.session() as db:
            return backup_service.take_back_secrets(db, data)

    data = await run_in_threadpool(secrets_back)
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

    await run_in_threadpool(write)
    audit_info(request, users=len(parsed.users), versions=len(parsed.versions))
    return RestoreOut(
        ok=True, users=len(parsed.users), versions=len(parsed.versions), bod_profiles=len(parsed.bod_profiles)
    )
