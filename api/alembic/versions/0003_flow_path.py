"""flows.path: how each closed flow crossed the satellite (direct or the peer path)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("flows", schema=None) as batch_op:
        batch_op.add_column(sa.Column("path", sa.String(length=8), nullable=True))
        batch_op.create_index(batch_op.f("ix_flows_path"), ["path"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("flows", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_flows_path"))
        batch_op.drop_column("path")
