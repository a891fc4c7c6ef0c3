"""The query of one `session/list` page (R-X2 shares join in; `query` filters)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import Select, func, literal, or_, select, tuple_

from agentd.store import shares
from agentd.store.models import SessionRow


def session_list_query(
    *,
    owner: str,
    cwd: str | None,
    before: tuple[datetime, str] | None,
    limit: int,
    teams: Collection[str] = (),
    query: str | None = None,
) -> Select[str, str, str | None, datetime, str]:
    """One `session/list` page. Only the listed columns are read, and the row-value
    comparison in this order is one range of the (owner[, cwd], updated_at, id) indexes
    (migration 0007): a page costs the same first or last, with or without the cwd filter.
    With `teams` the sessions shared with them join in (R-X2). A `query` filters the same
    range (title or cwd contains it, any case; `%` and `_` are plain characters): a page
    reads the principal's sessions newest first until it is full."""
    mine = SessionRow.owner == owner
    q = select(
        SessionRow.id, SessionRow.cwd, SessionRow.title, SessionRow.updated_at, SessionRow.owner
    ).where(or_(mine, SessionRow.id.in_(shares.shared_with(teams))) if teams else mine)
    if cwd is not None:
        q = q.where(SessionRow.cwd == cwd)
    if query:
        needle = query.lower()
        q = q.where(
            or_(
                func.lower(SessionRow.title).contains(needle, autoescape=True),
                func.lower(SessionRow.cwd).contains(needle, autoescape=True),
            )
        )
    if before is not None:
        at, sid = before
        bound = tuple_(literal(at, SessionRow.updated_at.type), literal(sid, SessionRow.id.type))
        q = q.where(tuple_(SessionRow.updated_at, SessionRow.id) < bound)
    return q.order_by(SessionRow.updated_at.desc(), SessionRow.id.desc()).limit(limit)
