"""session plan: the plan gate as a flag of its own, apart from the permission mode

Rows whose mode was `plan` become the gate over `default` (issue 16 item 8).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_sessions = sa.table("sessions", sa.column("mode", sa.String), sa.column("plan", sa.Boolean))


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("plan", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.execute(_sessions.update().where(_sessions.c.mode == "plan").values(mode="default", plan=True))


def downgrade() -> None:
    op.execute(_sessions.update().where(_sessions.c.plan.is_(True)).values(mode="plan"))
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("plan")
