"""Sessions shared with a team (R-X2): one row per (session, team) with its access, `watch`
or `drive`. The owner is the session row's; a share never changes it."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import Select, delete, insert, select

from agentd.store.aio import AsyncConnection
from agentd.store.models import SessionShareRow

Shares = dict[str, str]  # team -> access


async def set_access(conn: AsyncConnection, session_id: str, team: str, access: str | None) -> None:
    """`team`'s access to the session becomes `access`; None removes the share."""
    where = (SessionShareRow.session_id == session_id, SessionShareRow.team == team)
    await conn.execute(delete(SessionShareRow).where(*where))
    if access is not None:
        await conn.execute(insert(SessionShareRow).values(session_id=session_id, team=team, access=access))


async def of_sessions(conn: AsyncConnection, session_ids: Collection[str]) -> dict[str, Shares]:
    """The shares of each of `session_ids` that has any."""
    if not session_ids:
        return {}
    q = select(SessionShareRow.session_id, SessionShareRow.team, SessionShareRow.access).where(
        SessionShareRow.session_id.in_(list(session_ids))
    )
    out: dict[str, Shares] = {}
    for sid, team, access in (await conn.execute(q)).all():
        out.setdefault(sid, {})[team] = access
    return out


def shared_with(teams: Collection[str]) -> Select[str]:
    """The ids of sessions shared with any of `teams` (a subquery of `session/list`)."""
    return select(SessionShareRow.session_id).where(SessionShareRow.team.in_(sorted(teams)))


async def delete_session(conn: AsyncConnection, session_id: str) -> None:
    await conn.execute(delete(SessionShareRow).where(SessionShareRow.session_id == session_id))
