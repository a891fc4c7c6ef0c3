"""sessions, events, messages

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_bigint_pk = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("cwd", sa.Text(), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("mode", sa.String(32), nullable=False),
        sa.Column("model", sa.String(128), nullable=False),
        sa.Column("agent", sa.String(128), nullable=False),
        sa.Column("permission_memory", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_sessions_owner", "sessions", ["owner"])
    op.create_index("ix_sessions_updated_at", "sessions", ["updated_at"])
    op.create_index("ix_sessions_owner_updated", "sessions", ["owner", "updated_at"])
    op.create_table(
        "events",
        sa.Column("id", _bigint_pk, primary_key=True, autoincrement=True),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("session_id", "seq", name="uq_events_session_seq"),
    )
    op.create_table(
        "messages",
        sa.Column("id", _bigint_pk, primary_key=True, autoincrement=True),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.UniqueConstraint("session_id", "idx", name="uq_messages_session_idx"),
    )


def downgrade() -> None:
    op.drop_table("messages")
    op.drop_table("events")
    op.drop_index("ix_sessions_owner_updated", "sessions")
    op.drop_index("ix_sessions_updated_at", "sessions")
    op.drop_index("ix_sessions_owner", "sessions")
    op.drop_table("sessions")
