"""User management (admin) and API tokens (operator and up; stored hashed, shown once)."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from sqlalchemy import select

from perigee_api.api.deps import Admin, Db, Id, Operator, SettingsDep, audit_info
from perigee_api.api.routes.auth import user_out
from perigee_api.core import security
from perigee_api.core.errors import ApiError, ErrorResponse
from perigee_api.models import ApiToken, User
from perigee_api.schemas.api import (
    OkOut,
    TokenCreate,
    TokenCreated,
    TokenOut,
    UserCreate,
    UserCreated,
    UserOut,
    UserUpdate,
)
from perigee_api.services import auth as svc

router = APIRouter(tags=["users"], responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse}})


@router.get("/users", response_model=list[UserOut])
def list_users(who: Admin, db: Db) -> list[UserOut]:
    return [user_out(u) for u in db.scalars(select(User).order_by(User.id))]


@router.post("/users", response_model=UserCreated, status_code=201, responses={409: {"model": ErrorResponse}})
def create_user(body: UserCreate, who: Admin, db: Db, request: Request) -> UserCreated:
    if db.scalar(select(User).where(User.username == body.username)):
        raise ApiError(409, "username_taken", f"username '{body.username}' already exists", "username")
    otp = None
    password = body.password
    if password is None:
        otp = password = security.new_one_time_password()
    else:
        problem = svc.validate_new_password(password, body.username)
        if problem:
            raise ApiError(422, "weak_password", f"password: {problem}", "password")
    user = User(
        username=body.username,
        password_hash=security.hash_password(password),
        role=body.role,
        must_change_password=otp is not None,
        created_at=time.time(),
    )
    db.add(user)
    db.commit()
    audit_info(request, username=body.username, role=body.role)
    return UserCreated(user=user_out(user), one_time_password=otp)


def _user(db: Db, user_id: Id) -> User:
    user = db.get(User, user_id)
    if user is None:
        raise ApiError(404, "user_not_found", f"user {user_id} does not exist", "user_id")
    return user


def _admins_left(db: Db, excluding: int) -> int:
    return len(
        list(db.scalars(select(User.id).where(User.role == "admin", User.disabled.is_(False), User.id != excluding)))
    )


@router.get("/users/{user_id}", response_model=UserOut)
def get_user(user_id: Id, who: Admin, db: Db) -> UserOut:
    return user_out(_user(db, user_id))


@router.patch("/users/{user_id}", response_model=UserCreated, responses={409: {"model": ErrorResponse}})
def update_user(user_id: Id, body: UserUpdate, who: Admin, db: Db, request: Request) -> UserCreated:
    user = _user(db, user_id)
    demote = (body.role is not None and body.role != "admin") or body.disabled is True
    if user.role == "admin" and demote and _admins_left(db, user.id) == 0:
        raise ApiError(409, "last_admin", "this is the last enabled admin", "role")
    if body.role is not None:
        user.role = body.role
    if body.disabled is not None:
        user.disabled = body.disabled
        if body.disabled:
            svc.drop_user_sessions(db, user.id)
    otp = None
    if body.reset_password:
        otp = security.new_one_time_password()
        user.password_hash = security.hash_password(otp)
        user.must_change_password = True
        svc.drop_user_sessions(db, user.id)
        svc.revoke_user_tokens(db, user.id)
    db.commit()
    audit_info(request, user=user.username, role=body.role, disabled=body.disabled, reset=body.reset_password)
    return UserCreated(user=user_out(user), one_time_password=otp)


@router.delete("/users/{user_id}", response_model=OkOut, responses={409: {"model": ErrorResponse}})
def delete_user(user_id: Id, who: Admin, db: Db, request: Request) -> OkOut:
    user = _user(db, user_id)
    if user.id == who.user.id:
        raise ApiError(409, "cannot_delete_self", "you cannot delete your own account", "user_id")
    if user.role == "admin" and _admins_left(db, user.id) == 0:
        raise ApiError(409, "last_admin", "this is the last enabled admin", "user_id")
    db.delete(user)
    db.commit()
    audit_info(request, user=user.username)
    return OkOut()


def _token_out(tok: ApiToken, username: str) -> TokenOut:
    return TokenOut(
        id=tok.id,
        name=tok.name,
        prefix=tok.prefix,
        user_id=tok.user_id,
        username=username,
        scope=tok.scope,
        created_at=tok.created_at,
        expires_at=tok.expires_at,
        last_used_at=tok.last_used_at,
    )


@router.get("/tokens", response_model=list[TokenOut], summary="Own tokens (admins see all)")
def list_tokens(who: Operator, db: Db) -> list[TokenOut]:
    stmt = select(ApiToken, User.username).join(User, User.id == ApiToken.user_id).order_by(ApiToken.id)
    if who.role != "admin":
        stmt = stmt.where(ApiToken.user_id == who.user.id)
    return [_token_out(t, name) for t, name in db.execute(stmt)]


@router.post(
    "/tokens",
    response_model=TokenCreated,
    status_code=201,
    summary="New API token for yourself (from a logged-in session; it expires, and a password change ends it)",
)
def create_token(body: TokenCreate, who: Operator, db: Db, request: Request, settings: SettingsDep) -> TokenCreated:
    if who.token is not None:
        # A token minting tokens could outlive its own expiry and its owner's next password change.
        raise ApiError(403, "token_scope", "API tokens are made from a logged-in session, not with another token")
    days = body.expires_in_days or settings.token_default_days
    if days > settings.token_max_days:
        raise ApiError(422, "token_lifetime", f"expires_in_days: at most {settings.token_max_days}", "expires_in_days")
    secret = security.new_api_token()
    now = time.time()
    tok = ApiToken(
        user_id=who.user.id,
        name=body.name,
        token_hash=security.digest(secret),
        prefix=secret[:10],
        scope=body.scope,
        created_at=now,
        expires_at=now + days * 86400,
    )
    db.add(tok)
    db.commit()
    audit_info(request, token=body.name, scope=body.scope, days=days)
    return TokenCreated(token=_token_out(tok, who.name), secret=secret)


@router.delete("/tokens/{token_id}", response_model=OkOut)
def delete_token(token_id: Id, who: Operator, db: Db) -> OkOut:
    tok = db.get(ApiToken, token_id)
    if tok is None or (tok.user_id != who.user.id and who.role != "admin"):
        raise ApiError(404, "token_not_found", f"token {token_id} does not exist", "token_id")
    db.delete(tok)
    db.commit()
    return OkOut()
