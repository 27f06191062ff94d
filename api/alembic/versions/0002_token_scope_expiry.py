"""API tokens get a scope (read | operator) and an expiry.

Tokens made before this never expired and could do whatever their owner could: they keep the operator scope
(never more than their owner's role, and never admin) and expire 30 days after this migration, so automation
using them keeps working while new, scoped tokens are made.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import time

import sqlalchemy as sa

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

GRACE_S = 30 * 86400


def upgrade() -> None:
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("scope", sa.String(length=16), nullable=False, server_default="operator"))
        batch_op.add_column(sa.Column("expires_at", sa.Float(), nullable=False, server_default="0"))
    op.execute(sa.text("UPDATE api_tokens SET expires_at = :t").bindparams(t=time.time() + GRACE_S))
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.alter_column("scope", server_default=None)
        batch_op.alter_column("expires_at", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("api_tokens", schema=None) as batch_op:
        batch_op.drop_column("expires_at")
        batch_op.drop_column("scope")
