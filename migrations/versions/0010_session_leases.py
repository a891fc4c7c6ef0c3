"""session leases and fencing tokens: one owning replica per session (R-C1, issue 15)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01

`session_leases` holds each session's owner (a replica id), its fencing token (incremented
on every acquisition) and the lease's expiry (the database's clock). Events, messages,
queued prompts and session rows carry the token of the replica that wrote them (`fence`). On Postgres a
statement-level trigger per table rejects a statement any of whose rows carries a token
other than the session's current one (a row without a token — a tool, not a replica — is
accepted only while nobody holds a live lease): a
stale replica's late writes are refused by the database itself. The check locks the lease
rows FOR KEY SHARE, so a takeover (which locks its row FOR UPDATE) waits for a write in
flight, and a write after a takeover sees the new token. SQLite (one process) has the
columns but no triggers.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FENCED = ("events", "messages", "queued_prompts")  # keyed by session_id; `sessions` by id

CHECK_FUNCTION = """
CREATE OR REPLACE FUNCTION agentd_check_fence() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  bad varchar;
BEGIN
  SELECT n.session_id INTO bad
  FROM (SELECT DISTINCT r.session_id, r.fence FROM agentd_new_rows r) n
  LEFT JOIN LATERAL (
    SELECT l.token, l.expires_at > now() AS live
    FROM session_leases l WHERE l.session_id = n.session_id FOR KEY SHARE
  ) cur ON true
  WHERE n.fence IS DISTINCT FROM cur.token AND NOT (n.fence IS NULL AND cur.live IS NOT TRUE)
  LIMIT 1;
  IF bad IS NOT NULL THEN
    RAISE EXCEPTION 'agentd_stale_fence: session % holds a stale fencing token', bad
      USING ERRCODE = 'AGF01';
  END IF;
  RETURN NULL;
END
$$
"""


# `sessions` rows (updated only by the group commit; created without a token).
SESSION_CHECK_FUNCTION = CHECK_FUNCTION.replace(
    "agentd_check_fence()", "agentd_check_session_fence()"
).replace("SELECT DISTINCT r.session_id, r.fence", "SELECT DISTINCT r.id AS session_id, r.fence")

# The same check for the rare group commits that also delete (a truncation, queue rows):
# run first in their transaction, for every session the commit writes.
GUARD_FUNCTION = """
CREATE OR REPLACE FUNCTION agentd_fence_guard(sids varchar[], fences int8[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  bad varchar;
BEGIN
  SELECT n.s INTO bad
  FROM unnest(sids, fences) AS n(s, f)
  LEFT JOIN LATERAL (
    SELECT l.token, l.expires_at > now() AS live
    FROM session_leases l WHERE l.session_id = n.s FOR KEY SHARE
  ) cur ON true
  WHERE n.f IS DISTINCT FROM cur.token AND NOT (n.f IS NULL AND cur.live IS NOT TRUE)
  LIMIT 1;
  IF bad IS NOT NULL THEN
    RAISE EXCEPTION 'agentd_stale_fence: session % holds a stale fencing token', bad
      USING ERRCODE = 'AGF01';
  END IF;
END
$$
"""


def upgrade() -> None:
    op.create_table(
        "session_leases",
        sa.Column("session_id", sa.String(64), primary_key=True),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("token", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_session_leases_owner", "session_leases", ["owner"])
    for table in (*FENCED, "sessions"):
        op.add_column(table, sa.Column("fence", sa.BigInteger(), nullable=True))
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(CHECK_FUNCTION)
    op.execute(GUARD_FUNCTION)
    op.execute(SESSION_CHECK_FUNCTION)
    op.execute(
        "CREATE TRIGGER agentd_fence_update AFTER UPDATE ON sessions "
        "REFERENCING NEW TABLE AS agentd_new_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION agentd_check_session_fence()"
    )
    for table in FENCED:
        for action in ("INSERT", "UPDATE"):
            op.execute(
                f"CREATE TRIGGER agentd_fence_{action.lower()} AFTER {action} ON {table} "
                "REFERENCING NEW TABLE AS agentd_new_rows "
                "FOR EACH STATEMENT EXECUTE FUNCTION agentd_check_fence()"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in FENCED:
            for action in ("insert", "update"):
                op.execute(f"DROP TRIGGER IF EXISTS agentd_fence_{action} ON {table}")
        op.execute("DROP TRIGGER IF EXISTS agentd_fence_update ON sessions")
        op.execute("DROP FUNCTION IF EXISTS agentd_check_session_fence()")
        op.execute("DROP FUNCTION IF EXISTS agentd_check_fence()")
        op.execute("DROP FUNCTION IF EXISTS agentd_fence_guard(varchar[], int8[])")
    for table in (*FENCED, "sessions"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("fence")
    op.drop_index("ix_session_leases_owner", table_name="session_leases")
    op.drop_table("session_leases")
