"""managed terminals: at a hub, each terminal's management key (hashed) and last report, and the config versions
made for it; at a terminal, its link to the hub that manages it

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28 19:20:00
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "managed_terminals",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=True),
        sa.Column("enrolled_at", sa.Float(), nullable=False),
        sa.Column("last_report_at", sa.Float(), nullable=True),
        sa.Column("revision", sa.String(length=64), nullable=True),
        sa.Column("local_version_id", sa.Integer(), nullable=True),
        sa.Column("software", sa.String(length=64), nullable=True),
        sa.Column("health_ok", sa.Boolean(), nullable=True),
        sa.Column("problems", sa.JSON(), nullable=True),
        sa.Column("rx_bytes", sa.Integer(), nullable=True),
        sa.Column("tx_bytes", sa.Integer(), nullable=True),
        sa.Column("live_flows", sa.Integer(), nullable=True),
        sa.Column("last_config", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
        sa.UniqueConstraint("key_hash"),
    )
    op.create_table(
        "managed_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("terminal_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("created_by", sa.String(length=64), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("sections", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("reported_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["terminal_id"], ["managed_terminals.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_managed_versions_terminal_id"), "managed_versions", ["terminal_id"], unique=False)
    op.create_table(
        "managed_link",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("hub_url", sa.String(length=300), nullable=False),
        sa.Column("hub_pin", sa.String(length=80), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("management_key", sa.String(length=128), nullable=False),
        sa.Column("joined_at", sa.Float(), nullable=False),
        sa.Column("last_contact_at", sa.Float(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("hub_version_id", sa.Integer(), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.Column("outcome_error", sa.Text(), nullable=True),
        sa.Column("outcome_reported", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )


def downgrade() -> None:
    op.drop_table("managed_link")
    op.drop_index(op.f("ix_managed_versions_terminal_id"), table_name="managed_versions")
    op.drop_table("managed_versions")
    op.drop_table("managed_terminals")
