"""managed terminals' enrollments, cancelled versions and per-site reports: each version belongs to the
enrollment (the management key) it was made for, when it went out to the terminal and when it was cancelled or
superseded; each terminal's latest per-site figures

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28 22:40:00
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("managed_terminals", schema=None) as batch_op:
        batch_op.add_column(sa.Column("enrollment", sa.Integer(), nullable=False, server_default="1"))
        batch_op.add_column(sa.Column("sites", sa.JSON(), nullable=True))
    with op.batch_alter_table("managed_versions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("enrollment", sa.Integer(), nullable=False, server_default="1"))
        batch_op.add_column(sa.Column("delivered_at", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("ended_at", sa.Float(), nullable=True))
    # Before this revision versions followed the name: a pending one made before its terminal was enrolled again,
    # or for a revoked terminal, belongs to an enrollment that is over.
    op.execute(
        "UPDATE managed_versions SET state = 'superseded', "
        "error = 'superseded: made for an earlier enrollment of this terminal (its management key ended)' "
        "WHERE state = 'pending' AND EXISTS (SELECT 1 FROM managed_terminals t "
        "WHERE t.id = managed_versions.terminal_id "
        "AND (t.key_hash IS NULL OR t.enrolled_at > managed_versions.created_at))"
    )


def downgrade() -> None:
    with op.batch_alter_table("managed_versions", schema=None) as batch_op:
        batch_op.drop_column("ended_at")
        batch_op.drop_column("delivered_at")
        batch_op.drop_column("enrollment")
    with op.batch_alter_table("managed_terminals", schema=None) as batch_op:
        batch_op.drop_column("sites")
        batch_op.drop_column("enrollment")
