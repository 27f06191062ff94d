"""Secrets as the API shows them: a config leaving the API (a version, the running config, a diff, a backup)
carries each secret as its fingerprint, for every role; a config coming in with a fingerprint where a secret goes
keeps the secret it stands for (perigee_control.secret_fields says which fields are secrets).

The fingerprint's key is the API's own (created by the migration that introduced it, kept in `meta`), so a
fingerprint says nothing about a guessable secret to someone without the database.
"""

from __future__ import annotations

import secrets
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from perigee_api.core.errors import ApiError
from perigee_api.models import ConfigVersion, Meta
from perigee_control import secret_fields

KEY = "secret_fingerprint_key"
# The versions whose secrets a fingerprint sent back may stand for (what a client read recently).
RECENT_VERSIONS = 50


def key(db: Session) -> bytes:
    m = db.get(Meta, KEY)
    if m is None:
        m = Meta(key=KEY, value=secrets.token_hex(32))
        db.add(m)
        db.flush()
    return bytes.fromhex(m.value)


def shown(db: Session, config: dict[str, Any]) -> dict[str, Any]:
    """`config` as it may leave the API."""
    if not secret_fields.secret_paths():
        return config
    return secret_fields.redact(config, key(db))


def taken_back(db: Session, config: dict[str, Any], field: str = "config") -> dict[str, Any]:
    """`config` as a client sent it, each fingerprint of a secret replaced by the secret (from the recent
    versions). A fingerprint that stands for no secret held is a 422 naming where it is."""
    if not secret_fields.secret_paths():
        return config
    k = key(db)
    known: dict[str, str] = {}
    rows = db.scalars(select(ConfigVersion).order_by(ConfigVersion.id.desc()).limit(RECENT_VERSIONS))
    for v in rows:
        known.update(secret_fields.held(v.config, k))
    try:
        return secret_fields.unredact(config, known)
    except secret_fields.SecretError as exc:
        raise ApiError(422, "unknown_secret", str(exc), f"{field}.{exc.path}") from None
