"""Backup (users with argon2 hashes only, config versions with their secrets as fingerprints, BoD profiles; no API
tokens, no sessions, no private key) and restore (validated entirely first, then written in one transaction)."""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from sqlalchemy import delete
from sqlalchemy.orm import Session

from perigee_api import __version__
from perigee_api.core.security import is_argon2_hash
from perigee_api.models import ApiToken, BodProfile, BrowserSession, ConfigVersion, Meta, User
from perigee_api.schemas.gateway_config import GatewayConfig
from perigee_api.services import secret_view
from perigee_api.services.config_upgrade import scrub_shared_peer_key
from perigee_api.services.versions import ACTIVE_KEY, policy_errors
from perigee_api.tuning import OVERRIDABLE, BodInputs

FORMAT = "perigee-backup"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


class BackupUser(_Strict):
    username: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
    role: Literal["admin", "operator", "viewer"]
    password_hash: str = Field(max_length=255)
    must_change_password: bool = False
    disabled: bool = False
    created_at: float = Field(ge=0)

    @field_validator("password_hash")
    @classmethod
    def _argon2_only(cls, v: str) -> str:
        if not is_argon2_hash(v):
            raise ValueError("only argon2 hashes are accepted (never clear-text passwords)")
        return v


class BackupVersion(_Strict):
    id: int = Field(ge=1)
    config: GatewayConfig
    author: str = Field(max_length=64)
    comment: str = Field(max_length=1000)
    created_at: float = Field(ge=0)
    apply_status: Literal["none", "applied", "failed"] = "none"
    apply_result: dict[str, Any] | None = None
    applied_at: float | None = None


class BackupBod(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
    inputs: BodInputs
    overrides: dict[str, float] = Field(default_factory=dict)

    @field_validator("overrides")
    @classmethod
    def _known(cls, v: dict[str, float]) -> dict[str, float]:
        bad = [k for k in v if k not in OVERRIDABLE]
        if bad:
            raise ValueError(f"unknown overrides: {', '.join(bad)}")
        return v


class Backup(_Strict):
    format: Literal["perigee-backup"]
    format_version: Literal[1]
    created_at: float
    api_version: str = Field(max_length=32)
    users: list[BackupUser] = Field(min_length=1, max_length=10_000)
    versions: list[BackupVersion] = Field(min_length=1, max_length=100_000)
    active_version_id: int | None = None
    bod_profiles: list[BackupBod] = Field(default_factory=list, max_length=10_000)

    @model_validator(mode="after")
    def _consistent(self) -> Backup:
        names = [u.username for u in self.users]
        if len(set(names)) != len(names):
            raise ValueError("users: duplicate usernames")
        if not any(u.role == "admin" and not u.disabled for u in self.users):
            raise ValueError("users: at least one enabled admin is required")
        ids = [v.id for v in self.versions]
        if len(set(ids)) != len(ids):
            raise ValueError("versions: duplicate ids")
        if self.active_version_id is not None and self.active_version_id not in ids:
            raise ValueError("active_version_id names no version in the backup")
        bods = [b.name for b in self.bod_profiles]
        if len(set(bods)) != len(bods):
            raise ValueError("bod_profiles: duplicate names")
        for v in self.versions:
            errors, _ = policy_errors(v.config)
            if errors:
                raise ValueError(f"versions[id={v.id}]: {errors[0].message}")
        return self


def make_backup(db: Session) -> dict[str, Any]:
    active = db.get(Meta, ACTIVE_KEY)
    return {
        "format": FORMAT,
        "format_version": 1,
        "created_at": time.time(),
        "api_version": __version__,
        "users": [
            {
                "username": u.username,
                "role": u.role,
                "password_hash": u.password_hash,
                "must_change_password": u.must_change_password,
                "disabled": u.disabled,
                "created_at": u.created_at,
            }
            for u in db.query(User).order_by(User.id)
        ],
        "versions": [
            {
                "id": v.id,
                "config": secret_view.shown(db, v.config),
                "author": v.author,
                "comment": v.comment,
                "created_at": v.created_at,
                "apply_status": v.apply_status,
                "apply_result": v.apply_result,
                "applied_at": v.applied_at,
            }
            for v in db.query(ConfigVersion).order_by(ConfigVersion.id)
        ],
        "active_version_id": int(active.value) if active else None,
        "bod_profiles": [
            {"name": p.name, "inputs": p.inputs, "overrides": p.overrides}
            for p in db.query(BodProfile).order_by(BodProfile.id)
        ],
    }


def take_back_secrets(db: Session, data: Any) -> Any:
    """A backup file's versions with each secret's fingerprint replaced by the secret this API holds (a backup
    carries none); a fingerprint it does not hold is a 422 naming the version."""
    if not isinstance(data, dict) or not isinstance(data.get("versions"), list):
        return data
    for v in data["versions"]:
        # A backup from before per-terminal identities: its versions lose the shared key as the stored ones did.
        note = scrub_shared_peer_key(v["config"]) if isinstance(v, dict) and isinstance(v.get("config"), dict) else None
        if note:
            v["comment"] = str(v.get("comment", ""))[:900] + note
    out = dict(data)
    out["versions"] = [
        {**v, "config": secret_view.taken_back(db, v["config"], f"file.versions[{i}].config")}
        if isinstance(v, dict) and isinstance(v.get("config"), dict)
        else v
        for i, v in enumerate(data["versions"])
    ]
    return out


def restore(db: Session, backup: Backup) -> None:
    """Replace users, versions and profiles. The caller commits (or rolls back) the one transaction."""
    db.execute(delete(BrowserSession))
    db.execute(delete(ApiToken))
    db.execute(delete(User))
    db.execute(delete(ConfigVersion))
    db.execute(delete(BodProfile))
    db.execute(delete(Meta).where(Meta.key == ACTIVE_KEY))
    db.flush()
    for u in backup.users:
        db.add(User(**u.model_dump()))
    for v in backup.versions:
        data = v.model_dump(mode="json", by_alias=True)
        db.add(ConfigVersion(**data))
    now = time.time()
    for b in backup.bod_profiles:
        db.add(
            BodProfile(
                name=b.name,
                inputs=b.inputs.model_dump(mode="json"),
                overrides=b.overrides,
                created_at=now,
                updated_at=now,
            )
        )
    if backup.active_version_id is not None:
        db.add(Meta(key=ACTIVE_KEY, value=str(backup.active_version_id)))
