"""session list indexes: keyset pages newest first, with and without the cwd filter

`session/list` reads `WHERE owner = ? [AND cwd = ?] AND (updated_at, id) < (?, ?)
ORDER BY updated_at DESC, id DESC LIMIT n`. The old (owner, updated_at) index left the id
tie-break to a sort and a cwd filter to a scan of all the owner's sessions; these two
indexes answer both orders straight from the index. The single-column owner and
updated_at indexes are dropped: the first is a prefix of the new ones, the second served
no query, and every group commit rewrites `updated_at`, so each index on it costs writes.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("ix_sessions_owner_updated", table_name="sessions")
    op.drop_index("ix_sessions_owner", table_name="sessions")
    op.drop_index("ix_sessions_updated_at", table_name="sessions")
    op.create_index("ix_sessions_owner_updated_id", "sessions", ["owner", "updated_at", "id"])
    op.create_index("ix_sessions_owner_cwd_updated_id", "sessions", ["owner", "cwd", "updated_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_sessions_owner_cwd_updated_id", table_name="sessions")
    op.drop_index("ix_sessions_owner_updated_id", table_name="sessions")
    op.create_index("ix_sessions_owner", "sessions", ["owner"])
    op.create_index("ix_sessions_updated_at", "sessions", ["updated_at"])
    op.create_index("ix_sessions_owner_updated", "sessions", ["owner", "updated_at"])
