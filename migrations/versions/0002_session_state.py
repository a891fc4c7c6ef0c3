"""session state: goal, retry buckets, usage ledger

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("goal", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("retry_state", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("usage", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("usage")
        batch.drop_column("retry_state")
        batch.drop_column("goal")
