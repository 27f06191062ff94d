"""flows.satellite: each closed flow's satellite leg (its congestion control and why, segments sent and
retransmitted), as the gateway reported it; null for flows from an older gateway

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("flows", schema=None) as batch_op:
        batch_op.add_column(sa.Column("satellite", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("flows", schema=None) as batch_op:
        batch_op.drop_column("satellite")
