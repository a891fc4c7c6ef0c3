"""teams: the teams a token's principal acts in, and sessions shared with a team (R-X2)

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(sa.Column("teams", sa.JSON(), nullable=True))
    op.create_table(
        "session_shares",
        sa.Column("session_id", sa.String(64), primary_key=True),
        sa.Column("team", sa.String(128), primary_key=True),
        sa.Column("access", sa.String(16), nullable=False),
    )
    op.create_index("ix_session_shares_team", "session_shares", ["team", "session_id"])


def downgrade() -> None:
    op.drop_index("ix_session_shares_team", table_name="session_shares")
    op.drop_table("session_shares")
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_column("teams")
