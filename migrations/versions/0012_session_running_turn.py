"""sessions.running_turn: the turn a session's owner was running, for takeovers (R-C1, R-E6)

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01

The group commit sets it with a turn's `turn_started` and clears it with its `turn_ended`
(same transaction as the events). A session whose lease ran out while it is set (its owner
died mid-turn), or that still has queued prompts, is one another replica takes over and
recovers (agentd/session/replicas/takeover.py). The partial index holds only the sessions running
a turn now, so finding those candidates never reads the whole table.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RUNNING = sa.text("running_turn IS NOT NULL")


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("running_turn", sa.String(64), nullable=True))
    op.create_index(
        "ix_sessions_running_turn", "sessions", ["id"], postgresql_where=RUNNING, sqlite_where=RUNNING
    )


def downgrade() -> None:
    op.drop_index("ix_sessions_running_turn", table_name="sessions")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("running_turn")
