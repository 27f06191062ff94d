"""Login, logout, me, change password, CSRF bootstrap."""

from __future__ import annotations

import contextlib
import time

from fastapi import APIRouter, Request, Response
from sqlalchemy import select

from perigee_api.api.deps import AnyPrincipal, Db, SettingsDep, audit_info
from perigee_api.core import security
from perigee_api.core.client_address import client_address
from perigee_api.core.config import Settings
from perigee_api.core.errors import ApiError, ErrorResponse
from perigee_api.models import User
from perigee_api.schemas.api import ChangePasswordIn, CsrfOut, LoginIn, LoginOut, OkOut, UserOut
from perigee_api.services import audit, throttle
from perigee_api.services import auth as svc

router = APIRouter(prefix="/auth", tags=["auth"], responses={401: {"model": ErrorResponse}})


def user_out(u: User) -> UserOut:
    return UserOut(
        id=u.id,
        username=u.username,
        role=u.role,
        must_change_password=u.must_change_password,
        disabled=u.disabled,
        created_at=u.created_at,
    )


def _set_csrf(response: Response, settings: Settings, token: str) -> None:
    response.set_cookie(
        security.CSRF_COOKIE,
        token,
        httponly=False,
        secure=settings.secure_cookies,
        samesite="strict",
        path="/",
    )


@router.get("/csrf", response_model=CsrfOut, summary="Issue a CSRF token cookie (needed before login)")
def csrf(request: Request, response: Response, settings: SettingsDep) -> CsrfOut:
    token = request.cookies.get(security.CSRF_COOKIE) or security.new_secret()
    _set_csrf(response, settings, token)
    return CsrfOut(csrf_token=token)


def _throttled(verdict: throttle.Verdict) -> ApiError:
    whom = "this user from your address" if verdict.reason == "login_throttled" else "your address"
    return ApiError(
        429,
        verdict.reason,
        f"too many wrong passwords for {whom}: retry in {verdict.retry_after_s} s (each failure doubles the wait)",
        headers={"Retry-After": str(verdict.retry_after_s)},
    )


@router.post(
    "/login",
    response_model=LoginOut,
    responses={429: {"model": ErrorResponse}, 403: {"model": ErrorResponse}},
    summary="Log in: sets a new session cookie (HttpOnly) and a new CSRF cookie",
)
def login(body: LoginIn, request: Request, response: Response, db: Db, settings: SettingsDep) -> LoginOut:
    address = client_address(request.scope)
    verdict = throttle.check(db, settings, body.username, address)
    if not verdict.allowed:
        audit.record(db, actor=body.username, address=address, action="login", result=verdict.reason)
        db.commit()
        raise _throttled(verdict)
    user = svc.authenticate(db, body.username, body.password)
    throttle.note(db, body.username, address, user is not None)
    if user is None:
        audit.record(db, actor=body.username, address=address, action="login", result="bad_credentials")
        db.commit()
        raise ApiError(401, "bad_credentials", "wrong username or password")
    # Rotate: whatever session the client had is dropped; a new id is issued.
    old = request.cookies.get(security.SESSION_COOKIE)
    if old:
        svc.drop_session(db, old)
    sid, csrf_token = svc.create_session(db, settings, user, address)
    audit.record(db, actor=user.username, address=address, action="login", result="ok")
    db.commit()
    response.set_cookie(
        security.SESSION_COOKIE,
        sid,
        httponly=True,
        secure=settings.secure_cookies,
        samesite="strict",
        path="/",
        max_age=settings.session_ttl_s,
    )
    _set_csrf(response, settings, csrf_token)
    return LoginOut(user=user_out(user), csrf_token=csrf_token, must_change_password=user.must_change_password)


@router.post("/logout", response_model=OkOut, summary="End this session")
def logout(request: Request, response: Response, who: AnyPrincipal, db: Db) -> OkOut:
    sid = request.cookies.get(security.SESSION_COOKIE)
    if sid:
        svc.drop_session(db, sid)
        db.commit()
    response.delete_cookie(security.SESSION_COOKIE, path="/")
    response.delete_cookie(security.CSRF_COOKIE, path="/")
    return OkOut()


@router.get("/me", response_model=UserOut, summary="The logged-in user")
def me(who: AnyPrincipal) -> UserOut:
    return user_out(who.user)


@router.post(
    "/change-password",
    response_model=OkOut,
    responses={422: {"model": ErrorResponse}, 429: {"model": ErrorResponse}},
    summary="Change the own password (required after a one-time password); ends other sessions and all API tokens",
)
def change_password(
    body: ChangePasswordIn, request: Request, who: AnyPrincipal, db: Db, settings: SettingsDep
) -> OkOut:
    if who.token is not None:
        raise ApiError(403, "token_scope", "passwords are changed from a logged-in session, not with an API token")
    user = db.get(User, who.user.id)
    assert user is not None
    address = client_address(request.scope)
    # Guessing the current password here is guessing the login password: the same throttle, the same count.
    verdict = throttle.check(db, settings, user.username, address)
    if not verdict.allowed:
        raise _throttled(verdict)
    if not security.verify_password(body.current_password, user.password_hash):
        throttle.note(db, user.username, address, False)
        db.commit()  # the failure counts although the request fails (the middleware audits it)
        raise ApiError(422, "bad_current_password", "current_password is wrong", "current_password")
    problem = svc.validate_new_password(body.new_password, user.username)
    if problem:
        raise ApiError(422, "weak_password", f"new_password: {problem}", "new_password")
    if security.verify_password(body.new_password, user.password_hash):
        raise ApiError(422, "same_password", "new_password must differ from the current one", "new_password")
    user.password_hash = security.hash_password(body.new_password)
    was_pending = user.must_change_password
    user.must_change_password = False
    user.password_changed_at = time.time()
    throttle.note(db, user.username, address, True)
    svc.drop_user_sessions(db, user.id, keep_hash=who.session.id_hash if who.session else None)
    revoked = svc.revoke_user_tokens(db, user.id)
    audit_info(request, api_tokens_revoked=revoked)
    db.commit()
    if was_pending and user.username == "admin":
        remaining = db.scalar(select(User).where(User.must_change_password.is_(True), User.username == "admin"))
        if remaining is None:
            with contextlib.suppress(OSError):
                settings.initial_password_file.unlink(missing_ok=True)
    return OkOut()
