"""file snapshots and turn cuts: what rewind restores (R-T12, issue 16 item 14)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "turn_cuts",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("from_seq", sa.BigInteger(), nullable=False),
        sa.Column("to_seq", sa.BigInteger(), nullable=False),
        sa.Column("message_idx", sa.Integer(), nullable=True),
    )
    op.create_index("ix_turn_cuts_session", "turn_cuts", ["session_id"])
    op.create_table(
        "file_snapshots",
        sa.Column("session_id", sa.String(64), primary_key=True),
        sa.Column("turn_id", sa.String(64), primary_key=True),
        sa.Column("path", sa.Text(), primary_key=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("file_snapshots")
    op.drop_index("ix_turn_cuts_session", table_name="turn_cuts")
    op.drop_table("turn_cuts")
