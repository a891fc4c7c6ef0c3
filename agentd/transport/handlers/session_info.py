"""What the page's session list shows beyond the stored row (issue 17): each listed session's
live status, queue length and the other clients attached to it; the search term of
`session/list`; and `_agentd/session/rename`."""

from __future__ import annotations

import asyncio
from collections import Counter
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from agentd.protocol import RenameParams, RpcError
from agentd.session import SetTitle
from agentd.transport.handlers.common import agentd_meta, session_for
from agentd.transport.sharing import Access, holder
from agentd.transport.state import CallContext

if TYPE_CHECKING:
    from agentd.session import SessionActor
    from agentd.store import SessionSummary

QUERY_MAX = 200  # characters of a `session/list` search term


class SessionStatus(StrEnum):
    IDLE = "idle"
    RUNNING = "running"
    WAITING_PERMISSION = "waiting_permission"  # a running turn waits for a client's answer


def search_query(meta: Any) -> str | None:
    """`_meta.agentd.query` of `session/list`: a case-insensitive substring of the title or
    the cwd; absent or blank lists everything."""
    value = agentd_meta(meta).get("query")
    if value is None:
        return None
    # NUL or a line break matches no title, and Postgres refuses a NUL outright.
    if not isinstance(value, str) or len(value) > QUERY_MAX or not value.isprintable():
        msg = f"query is one line of at most {QUERY_MAX} printable characters"
        path = "_meta.agentd.query"
        raise RpcError.invalid_params(f"Invalid params: {path}: {msg}", [{"path": path, "message": msg}])
    return value.strip() or None


def status_of(actor: SessionActor | None) -> SessionStatus:
    if actor is None:
        return SessionStatus.IDLE  # a session that is not loaded runs nothing
    if actor.permissions.pending:
        return SessionStatus.WAITING_PERMISSION
    turn = actor.running
    # A turn whose `turn_ended` is out has ended, though the actor lets go of it a step later.
    return SessionStatus.RUNNING if turn is not None and turn.outcome is None else SessionStatus.IDLE


def live_listing(ctx: CallContext, rows: list[SessionSummary]) -> dict[str, dict[str, Any]]:
    """`status`, `queued` and `attached` of each listed session (all idle and empty when it
    is not loaded). `attached` counts the *other* clients watching it, by principal: the
    caller's own connection is left out; no connection ids, teams or tokens are shown."""
    out: dict[str, dict[str, Any]] = {}
    mine = ctx.connection
    for r in rows:
        actor = ctx.state.manager.live_actor(r.id)
        attached: Counter[str] = Counter()
        if actor is not None:
            for sink in actor.hub.sinks:
                if mine is not None and getattr(sink, "_conn", sink) is mine:
                    continue
                held = holder(sink)
                attached[held[0] if held else "unknown"] += 1
        out[r.id] = {
            "status": status_of(actor).value,
            "queued": actor.queued if actor is not None else 0,
            "attached": [{"principal": p, "clients": n} for p, n in sorted(attached.items())],
        }
    return out


async def session_rename(ctx: CallContext, params: RenameParams) -> dict[str, Any]:
    """A driver or the owner names the session; the title is stored (it outlives restarts)
    and every attached client gets a `session_info_update` before the answer."""
    actor = await session_for(ctx, params.session_id, Access.DRIVE)
    since = ctx.state.writer.mark()
    reply: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    actor.send(SetTitle(params.title, reply))
    await reply
    await ctx.state.writer.require_committed(actor.id, since)  # stored before the answer
    return {"sessionId": actor.id, "title": params.title}
