"""ASGI middleware: the real client address, body size limit (413), CSRF double-submit check, audit of writes."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from sqlalchemy.exc import OperationalError
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from perigee_api.core import client_address as addresses
from perigee_api.core import security
from perigee_api.core.context import AppContext
from perigee_api.core.storage import is_storage_full
from perigee_api.services import audit

log = logging.getLogger("perigee_api.audit")

UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
RESTORE_PATH = "/api/v1/system/restore"
# A restore request is the backup file plus its multipart framing (boundaries, part headers).
MULTIPART_SLACK_BYTES = 64 * 1024


async def _reply(send: Send, status: int, code: str, message: str, field: str | None = None) -> None:
    body = json.dumps({"error": {"code": code, "message": message, "field": field, "details": None}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _cookies(header: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in header.split(";"):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k.strip()] = v.strip().strip('"')
    return out


class GuardMiddleware:
    def __init__(self, app: ASGIApp, ctx: AppContext) -> None:
        self.app = app
        self.ctx = ctx
        self.proxies = addresses.FrontProxies.parse(ctx.settings.forwarded_allow_ips)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        addresses.resolve(scope, self.proxies)
        method = scope["method"]
        path: str = scope["path"]
        headers = _headers(scope)
        settings = self.ctx.settings
        limit = settings.max_restore_bytes + MULTIPART_SLACK_BYTES if path == RESTORE_PATH else settings.max_body_bytes

        # 1. Body size: refuse by Content-Length, else buffer up to the limit and replay.
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.isdigit():
                await _reply(send, 400, "bad_content_length", "Content-Length is not a number")
                return
            if int(declared) > limit:
                await _reply(send, 413, "payload_too_large", f"request body over {limit} bytes", "body")
                await self._audit_rejected(scope, 413)
                return
        chunks: list[bytes] = []
        size = 0
        if method in UNSAFE or declared:
            more = True
            while more:
                msg = await receive()
                if msg["type"] == "http.disconnect":
                    return
                chunk = msg.get("body", b"")
                size += len(chunk)
                if size > limit:
                    await _reply(send, 413, "payload_too_large", f"request body over {limit} bytes", "body")
                    await self._audit_rejected(scope, 413)
                    return
                chunks.append(chunk)
                more = msg.get("more_body", False)
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        # 2. CSRF double submit for every unsafe method not authenticated by a Bearer token.
        bearer = headers.get("authorization", "").lower().startswith("bearer ")
        # The enrollment and managed-terminal routes read no cookie (a token or key is the credential): nothing
        # there for a forged request.
        if method in UNSAFE and path.startswith("/api/") and not bearer and path not in security.CSRF_EXEMPT:
            cookie = _cookies(headers.get("cookie", "")).get(security.CSRF_COOKIE, "")
            header = headers.get(security.CSRF_HEADER.lower(), "")
            if not cookie or not header or not security.same(cookie, header):
                await _reply(
                    send,
                    403,
                    "csrf_failed",
                    f"missing or mismatched CSRF token: send the {security.CSRF_COOKIE} cookie's value "
                    f"in the {security.CSRF_HEADER} header",
                    security.CSRF_HEADER,
                )
                await self._audit_rejected(scope, 403)
                return

        # 3. Run, and audit writes (logins are audited by the login route with the username).
        status = {"code": 500}

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        await self.app(scope, replay, capture)
        if method in UNSAFE and path.startswith("/api/") and not path.endswith("/auth/login"):
            info: dict[str, Any] = scope.get("perigee", {})
            if info.get("read_only"):
                return  # a preview that stores nothing (BoD derive, config preview) is no change to audit
            await run_in_threadpool(self._audit, info, method, path, status["code"], addresses.client_address(scope))

    async def _audit_rejected(self, scope: Scope, status: int) -> None:
        """Writes refused before routing (too large, no CSRF token) are audited too."""
        if scope["method"] in UNSAFE and scope["path"].startswith("/api/"):
            await run_in_threadpool(
                self._audit, {}, scope["method"], scope["path"], status, addresses.client_address(scope)
            )

    def _audit(self, info: dict[str, Any], method: str, path: str, status: int, address: str) -> None:
        try:
            self._write_audit(info, method, path, status, address)
        except OperationalError as exc:
            if not is_storage_full(exc):
                raise
            # The answer is already sent (a 507 for the write itself); the entry goes to the log instead.
            log.warning(
                "audit entry not stored (database disk full): %s %s %s -> %d by %s",
                address,
                method,
                path,
                status,
                info.get("actor", "anonymous"),
            )

    def _write_audit(self, info: dict[str, Any], method: str, path: str, status: int, address: str) -> None:
        with self.ctx.db.session() as db:
            audit.record(
                db,
                actor=str(info.get("actor", "anonymous")),
                address=address,
                action=f"{method} {path}",
                target=str(info.get("target", path)),
                result="ok" if status < 400 else f"http_{status}",
                detail={"status": status, "at": time.time(), **(info.get("detail") or {})},
            )
            db.commit()
