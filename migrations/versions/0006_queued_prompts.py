"""queued prompts: one row per queued prompt instead of the whole queue in the session row

A queue change then writes only what changed (an added or edited prompt's text, a
deleted row, a few positions), never every waiting prompt again. Existing queues move
over as they are.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _request_id(meta: Any) -> str | None:
    value = meta.get("requestId") if isinstance(meta, dict) else None
    return value if isinstance(value, str) and value else None


def upgrade() -> None:
    queued = op.create_table(
        "queued_prompts",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("last_editor", sa.String(128), nullable=False),
        sa.Column("send_now", sa.Boolean(), nullable=False),
        sa.Column("request_id", sa.Text(), nullable=True),
        sa.Column("blocks", sa.JSON(), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=False),
    )
    op.create_index("ix_queued_prompts_session", "queued_prompts", ["session_id", "position"])
    sessions = sa.table("sessions", sa.column("id", sa.String), sa.column("queue", sa.JSON))
    conn = op.get_bind()
    rows = []
    for session_id, queue in conn.execute(sa.select(sessions.c.id, sessions.c.queue)).all():
        for position, item in enumerate(queue or []):
            if not isinstance(item, dict) or "id" not in item:
                continue
            meta = item.get("meta") or {}
            rows.append(
                {
                    "id": item["id"],
                    "session_id": session_id,
                    "position": position,
                    "kind": item.get("kind", "prompt"),
                    "version": int(item.get("version", 1)),
                    "owner": item.get("owner", "local"),
                    "last_editor": item.get("lastEditor", "local"),
                    "send_now": bool(item.get("sendNow", False)),
                    "request_id": _request_id(meta),
                    "blocks": item.get("blocks") or [],
                    "meta": meta,
                }
            )
    if rows:
        op.bulk_insert(queued, rows)
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("queue")


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("queue", sa.JSON(), nullable=True))
    queued = sa.table(
        "queued_prompts",
        *(
            sa.column(c)
            for c in ("id", "session_id", "position", "kind", "version", "owner", "last_editor", "send_now")
        ),
        sa.column("blocks", sa.JSON),
        sa.column("meta", sa.JSON),
    )
    sessions = sa.table("sessions", sa.column("id", sa.String), sa.column("queue", sa.JSON))
    conn = op.get_bind()
    by_session: dict[str, list[dict[str, Any]]] = {}
    for r in conn.execute(sa.select(queued).order_by(queued.c.session_id, queued.c.position)).all():
        by_session.setdefault(r.session_id, []).append(
            {
                "id": r.id,
                "kind": r.kind,
                "version": r.version,
                "owner": r.owner,
                "lastEditor": r.last_editor,
                "sendNow": bool(r.send_now),
                "blocks": r.blocks,
                "meta": r.meta,
            }
        )
    for session_id, queue in by_session.items():
        conn.execute(sa.update(sessions).where(sessions.c.id == session_id).values(queue=queue))
    op.drop_index("ix_queued_prompts_session", table_name="queued_prompts")
    op.drop_table("queued_prompts")
