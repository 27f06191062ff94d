"""One error shape for every answer: {"error": {"code", "message", "field", "details"}}."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from sqlalchemy.exc import OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from perigee_api.core import security
from perigee_api.core.messages import headline, humanize
from perigee_api.core.storage import is_storage_full
from perigee_control.client import GatewayError

log = logging.getLogger("perigee_api.errors")

STORAGE_FULL_MESSAGE = (
    "the disk under the API's database is full: the change was not saved (nothing was half-written); "
    "free space in the data directory and retry"
)

# Every refusal of an enrollment token, and a malformed request to redeem one, says only this (core/security.py's
# ENROLL_PATH): which of unknown, used, expired or revoked it was is the audit log's to say.
ENROLLMENT_REFUSED = "the enrollment token is not valid: ask the hub's operator for a new one"


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str | None = None,
        details: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.details = details
        self.headers = headers


class ErrorBody(BaseModel):
    code: str
    message: str
    field: str | None = None
    details: Any = None


class ErrorResponse(BaseModel):
    error: ErrorBody


def error_json(
    status: int,
    code: str,
    message: str,
    field: str | None = None,
    details: Any = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = {"error": {"code": code, "message": message, "field": field, "details": details}}
    return JSONResponse(body, status_code=status, headers=headers)


ENROLL_FINGERPRINT = ("body", "fingerprint")


def _loc(loc: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(p) for p in loc)


def validation_details(errors: list[Any]) -> list[dict[str, Any]]:
    """Each error with its field path, the field's label and what is allowed (perigee_api.core.messages)."""
    return humanize(errors)


# A path's own refusal of a malformed request (None: the request's credential is good, say what is malformed).
Refusal = Callable[[Request], Awaitable[JSONResponse | None]]


def install(app: FastAPI, refusals: dict[str, Refusal] | None = None) -> None:
    refusals = refusals or {}

    @app.exception_handler(ApiError)
    async def _api_error(_req: Request, exc: ApiError) -> JSONResponse:
        return error_json(exc.status, exc.code, exc.message, exc.field, exc.details, exc.headers)

    @app.exception_handler(GatewayError)
    async def _gateway_error(_req: Request, exc: GatewayError) -> JSONResponse:
        status = 502 if exc.status >= 500 or exc.code == "gateway_unreachable" else 409
        return error_json(status, exc.code, f"gateway: {exc.message}", exc.field, exc.as_dict())

    @app.exception_handler(RequestValidationError)
    async def _validation(req: Request, exc: RequestValidationError) -> JSONResponse:
        details = validation_details(list(exc.errors()))
        if req.url.path == security.ENROLL_PATH and any(
            tuple(e.get("loc", ())) != ENROLL_FINGERPRINT for e in exc.errors()
        ):
            # Anything but a bad fingerprint: the generic refusal (a fingerprint's format is no secret: a 422).
            return error_json(400, "enrollment_refused", ENROLLMENT_REFUSED)
        refuse = refusals.get(req.url.path)
        if refuse is not None and (refusal := await refuse(req)) is not None:
            # A route whose credential is checked in the route (a managed terminal's key): a request without a
            # valid one gets that route's one refusal, however malformed it is.
            return refusal
        field = details[0]["field"] if details else None
        return error_json(422, "validation_error", headline(details), field, details)

    @app.exception_handler(ValidationError)
    async def _model_validation(_req: Request, exc: ValidationError) -> JSONResponse:
        details = validation_details(list(exc.errors()))
        field = details[0]["field"] if details else None
        return error_json(422, "validation_error", headline(details), field, details)

    @app.exception_handler(OperationalError)
    async def _database(_req: Request, exc: OperationalError) -> JSONResponse:
        # A full disk is the operator's to fix and the database is intact (SQLite rolled the write back): 507.
        # Any other operational failure (locked past busy_timeout, I/O error) is logged and answered 503.
        if is_storage_full(exc):
            log.warning("write refused, database disk full: %s", exc.orig)
            return error_json(507, "storage_full", STORAGE_FULL_MESSAGE)
        log.error("database failure: %s", exc.orig)
        return error_json(503, "database_unavailable", f"the API's database failed: {exc.orig}")

    @app.exception_handler(OSError)
    async def _os_error(_req: Request, exc: OSError) -> JSONResponse:
        if is_storage_full(exc):
            log.warning("write refused, disk full: %s", exc)
            return error_json(507, "storage_full", STORAGE_FULL_MESSAGE)
        raise exc

    @app.exception_handler(RecursionError)
    async def _too_deep(_req: Request, _exc: RecursionError) -> JSONResponse:
        # Parsing or validating absurdly nested input (e.g. 100,000 brackets): the input's fault, not ours.
        return error_json(400, "nested_too_deep", "the request is nested too deeply")

    @app.exception_handler(StarletteHTTPException)
    async def _http(_req: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed", 401: "unauthorized", 403: "forbidden"}.get(
            exc.status_code, "http_error"
        )
        return error_json(exc.status_code, code, str(exc.detail), headers=getattr(exc, "headers", None))
