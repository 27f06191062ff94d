"""gateways: the fleet's members on other hosts (address, metrics port, the issued certificate)

Revision ID: fleet_gateways
Revises: 0003
Create Date: 2026-11-24 14:30:00
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

# A name, not a number: this chains after whichever migration is newest when it is merged.
revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gateways",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("port", sa.Integer(), nullable=False),
        sa.Column("metrics_port", sa.Integer(), nullable=False),
        sa.Column("cert_fingerprint", sa.String(length=128), nullable=False),
        sa.Column("cert_not_after", sa.Float(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("created_by", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )


def downgrade() -> None:
    op.drop_table("gateways")
