"""gateways.cert_serial and fleet_revocations: removing a gateway revokes its certificate

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27 12:30:00
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("gateways") as batch:
        batch.add_column(sa.Column("cert_serial", sa.String(length=40), nullable=True))
    op.create_table(
        "fleet_revocations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("serial", sa.String(length=40), nullable=False),
        sa.Column("subject", sa.String(length=128), nullable=False),
        sa.Column("revoked_at", sa.Float(), nullable=False),
        sa.Column("not_after", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("serial"),
    )


def downgrade() -> None:
    op.drop_table("fleet_revocations")
    with op.batch_alter_table("gateways") as batch:
        batch.drop_column("cert_serial")
