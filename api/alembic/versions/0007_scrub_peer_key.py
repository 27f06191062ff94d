"""config_versions: the shared peer key goes (every terminal has its own identity now); the API's key for
showing secrets as fingerprints

Every stored version, those imported from a running gateway included, loses `peer.key` (the fleet-wide secret
every viewer could read) and `peer.allowed` (replaced by the enrolled terminals' prefixes). A terminal whose
peer path the key enabled keeps it configured but disabled: it reaches its hub again once its hub's identity is
pinned (`peer.hub_fingerprints`) and it is enrolled there. The version's comment says what the upgrade did.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27 12:00:00
"""

from __future__ import annotations

import json
import secrets

import sqlalchemy as sa

from alembic import op
from perigee_api.services.config_upgrade import scrub_shared_peer_key

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

FINGERPRINT_KEY = "secret_fingerprint_key"


def upgrade() -> None:
    bind = op.get_bind()
    versions = sa.table(
        "config_versions", sa.column("id", sa.Integer), sa.column("config", sa.Text), sa.column("comment", sa.Text)
    )
    for vid, raw, comment in bind.execute(sa.select(versions.c.id, versions.c.config, versions.c.comment)).all():
        config = json.loads(raw) if isinstance(raw, str) else raw
        note = scrub_shared_peer_key(config)
        if note is None:
            continue
        bind.execute(
            versions.update()
            .where(versions.c.id == vid)
            .values(config=json.dumps(config), comment=(comment or "") + note)
        )
    meta = sa.table("meta", sa.column("key", sa.String), sa.column("value", sa.Text))
    if bind.execute(sa.select(meta.c.key).where(meta.c.key == FINGERPRINT_KEY)).first() is None:
        bind.execute(meta.insert().values(key=FINGERPRINT_KEY, value=secrets.token_hex(32)))


def downgrade() -> None:
    # The key is gone for good: nothing to put back.
    meta = sa.table("meta", sa.column("key", sa.String))
    op.get_bind().execute(meta.delete().where(meta.c.key == FINGERPRINT_KEY))
