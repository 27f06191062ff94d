"""nginx's TLS certificate: what it serves, and replacing it with an uploaded chain and key."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request

from perigee_api.api.deps import Admin, Ctx, Viewer, audit_info
from perigee_api.core.errors import ApiError, ErrorResponse
from perigee_api.schemas.api import TlsIn, TlsOut
from perigee_api.services import tls as tls_service

router = APIRouter(tags=["system"], responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}})


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
