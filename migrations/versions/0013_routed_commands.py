"""routed commands: a request sent to one replica for a session another owns (R-C1)

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01

`routed_commands` carries a command from the replica a client is connected to (`caller`)
to the one owning the session (`target`), and the owner's answer back
(agentd/store/routed.py). A row lives from the forward to the caller reading the answer;
the wake-ups are NOTIFYs on each replica's channel. Used on Postgres only (SQLite is one
process); the table exists on both so the schema is one.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "routed_commands",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("target", sa.String(128), nullable=False),
        sa.Column("caller", sa.String(128), nullable=False),
        sa.Column("method", sa.String(100), nullable=False),
        sa.Column("principal", sa.String(200), nullable=False),
        sa.Column("teams", sa.JSON(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("runner", sa.String(64), nullable=True),
        sa.Column("outcome", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_routed_commands_target", "routed_commands", ["target", "state"])
    op.create_index("ix_routed_commands_caller", "routed_commands", ["caller"])


def downgrade() -> None:
    op.drop_index("ix_routed_commands_caller", table_name="routed_commands")
    op.drop_index("ix_routed_commands_target", table_name="routed_commands")
    op.drop_table("routed_commands")
