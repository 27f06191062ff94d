"""flows.site, relay and dscp: the remote site of each closed flow, who terminated it (the splitter or
Squid), and the DSCP its re-originated leg carried

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24 18:00:00
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("flows", schema=None) as batch_op:
        batch_op.add_column(sa.Column("site", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("relay", sa.String(length=8), nullable=True))
        batch_op.add_column(sa.Column("dscp", sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f("ix_flows_site"), ["site"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("flows", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_flows_site"))
        batch_op.drop_column("dscp")
        batch_op.drop_column("relay")
        batch_op.drop_column("site")
