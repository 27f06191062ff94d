"""Request dependencies: database session, gateway client, authentication and role checks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi import Path as FastApiPath
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from perigee_api.core import security
from perigee_api.core.client_address import client_address
from perigee_api.core.config import Settings
from perigee_api.core.context import AppContext
from perigee_api.core.errors import ApiError
from perigee_api.core.storage import is_storage_full
from perigee_api.models import ApiToken, BrowserSession, User
from perigee_api.schemas.api import ChangeOut, PolicyIssue
from perigee_api.services import auth as auth_service
from perigee_api.services import versions
from perigee_control.client import GatewayClient


def get_ctx(request: Request) -> AppContext:
    ctx: AppContext = request.app.state.ctx
    return ctx


Ctx = Annotated[AppContext, Depends(get_ctx)]


def get_db(ctx: Ctx) -> Iterator[Session]:
    # Routes commit explicitly; anything not committed (e.g. after a validation error) is rolled back.
    with ctx.db.session() as db:
        yield db


Db = Annotated[Session, Depends(get_db)]


def get_gateway(ctx: Ctx) -> GatewayClient:
    return ctx.gateway


Gateway = Annotated[GatewayClient, Depends(get_gateway)]


def get_settings(ctx: Ctx) -> Settings:
    return ctx.settings


SettingsDep = Annotated[Settings, Depends(get_settings)]


@dataclass
class Principal:
    user: User
    via: str  # "session" | "token"
    session: BrowserSession | None
    address: str
    token: ApiToken | None = None

    @property
    def name(self) -> str:
        return self.user.username

    @property
    def role(self) -> str:
        """The role this request acts with: a token's is capped by its scope."""
        if self.token is not None:
            return auth_service.token_role(self.user, self.token)
        return self.user.role


def change_out(stored: versions.Stored) -> ChangeOut:
    """What a config change answers: its version, the policy's warnings, whether a new version was made."""
    issues = [PolicyIssue(**i) for i in versions.issues_json(stored.warnings)]
    return ChangeOut(version_id=stored.version.id, issues=issues, changed=stored.changed)


def read_only(request: Request) -> None:
    """Marks a POST that changes nothing (a preview): it is not written to the audit log."""
    request.scope.setdefault("perigee", {})["read_only"] = True


def audit_info(request: Request, **detail: Any) -> None:
    """Adds details to the audit entry the middleware writes for this request."""
    info = request.scope.setdefault("perigee", {})
    info.setdefault("detail", {}).update(detail)


def _authenticate(request: Request, db: Session) -> Principal:
    address = client_address(request.scope)
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        found = auth_service.token_user(db, header[7:].strip())
        if found is None:
            raise ApiError(
                401,
                "invalid_token",
                "API token is unknown, expired or revoked",
                headers={"WWW-Authenticate": "Bearer"},
            )
        try:
            db.commit()  # last_used_at
        except OperationalError as exc:
            if not is_storage_full(exc):
                raise
            db.rollback()  # a full disk costs the token's last-use time, not the request
        if found[1].scope == "read" and request.method not in ("GET", "HEAD", "OPTIONS"):
            raise ApiError(403, "token_scope", "this API token has scope 'read': GET requests only")
        principal = Principal(found[0], "token", None, address, token=found[1])
    else:
        sid = request.cookies.get(security.SESSION_COOKIE)
        sess = auth_service.session_for(db, sid) if sid else None
        if sess is None:
            raise ApiError(401, "not_authenticated", "log in first (session cookie) or send a Bearer API token")
        user = db.get(User, sess.user_id)
        if user is None or user.disabled:
            raise ApiError(401, "not_authenticated", "the session's user no longer exists or is disabled")
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            # The double-submit value must also be the one issued with this session.
            sent = request.headers.get(security.CSRF_HEADER, "")
            if not security.same(sent, sess.csrf_token):
                raise ApiError(403, "csrf_failed", "CSRF token does not belong to this session", security.CSRF_HEADER)
        principal = Principal(user, "session", sess, address)
    request.scope.setdefault("perigee", {})["actor"] = principal.name
    return principal


def current_user_pending_ok(request: Request, db: Db) -> Principal:
    """For change-password, logout and me: allowed while a password change is still required."""
    return _authenticate(request, db)


def current_user(request: Request, db: Db) -> Principal:
    p = _authenticate(request, db)
    if p.user.must_change_password:
        raise ApiError(
            403,
            "password_change_required",
            "this account's password must be changed first (POST /api/v1/auth/change-password)",
        )
    return p


AnyPrincipal = Annotated[Principal, Depends(current_user_pending_ok)]


def require(role: str) -> Callable[..., Principal]:
    def dep(request: Request, db: Db) -> Principal:
        p = current_user(request, db)
        if not auth_service.role_at_least(p.role, role):
            if p.token is not None and auth_service.role_at_least(p.user.role, role):
                message = f"this needs role '{role}': more than the API token's scope '{p.token.scope}' allows"
                raise ApiError(403, "token_scope", message)
            raise ApiError(403, "forbidden_role", f"this needs role '{role}' (you are '{p.user.role}')")
        return p

    dep.__name__ = f"require_{role}"
    return dep


Viewer = Annotated[Principal, Depends(require("viewer"))]
Operator = Annotated[Principal, Depends(require("operator"))]
Admin = Annotated[Principal, Depends(require("admin"))]


# Database ids: bounded so that a huge number is a 422, not an SQLite overflow.
Id = Annotated[int, FastApiPath(ge=1, le=2**62)]
