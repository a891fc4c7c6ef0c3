"""Goals, usage, compaction and rewind: `_agentd/goal/set|get|clear`, `_agentd/usage/get`,
`_agentd/session/compact`, `_agentd/session/rewind`."""

from __future__ import annotations

import asyncio
from typing import Any

from agentd.protocol import GoalSetParams, RewindParams, SessionParams
from agentd.session import Compact, GoalClear, GoalGet, GoalSet, PromptDone, Rewind
from agentd.transport.handlers.common import session_for
from agentd.transport.sharing import Access
from agentd.transport.state import CallContext


async def goal_set(ctx: CallContext, params: GoalSetParams) -> dict[str, Any]:
    actor = await session_for(ctx, params.session_id, Access.DRIVE)
    reply: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    actor.send(GoalSet(params.objective, params.token_budget, params.verify, reply))
    return {"goal": await reply}


async def goal_get(ctx: CallContext, params: SessionParams) -> dict[str, Any]:
    actor = await session_for(ctx, params.session_id, Access.WATCH)
    reply: asyncio.Future[dict[str, Any] | None] = asyncio.get_running_loop().create_future()
    actor.send(GoalGet(reply))
    goal = await reply
    return {"goal": goal} if goal else {}


async def goal_clear(ctx: CallContext, params: SessionParams) -> dict[str, Any]:
    actor = await session_for(ctx, params.session_id, Access.DRIVE)
    reply: asyncio.Future[dict[str, Any] | None] = asyncio.get_running_loop().create_future()
    actor.send(GoalClear(reply))
    previous = await reply
    return {"cleared": previous} if previous else {}


async def usage_get(ctx: CallContext, params: SessionParams) -> dict[str, Any]:
    """The session's usage ledger (R-R4): tokens, cost, per lane; `dirty` when some call's
    final usage could not be read; `incomplete` while a background sub-agent still runs (R-T11).
    `retry`: the retry buckets' counts in their window (R-R2)."""
    actor = await session_for(ctx, params.session_id, Access.WATCH)
    session = actor.usage.to_dict()
    if actor.loop_state.subagents.running_background():
        # 000 (background_live): a background sub-agent still runs — its spend is not in yet;
        # the report is incomplete, not dirty (the ledger books it when the child ends).
        session["incomplete"] = True
    return {"sessionId": actor.id, "session": session, "retry": actor.loop_state.retry.snapshot()}


async def session_compact(ctx: CallContext, params: SessionParams) -> dict[str, Any]:
    actor = await session_for(ctx, params.session_id, Access.DRIVE)
    reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    actor.send(Compact(reply))
    done = await reply
    if not isinstance(done, PromptDone):
        return {"status": "scheduled"}  # a turn is running: it compacts before its next request
    out: dict[str, Any] = {"status": done.outcome.kind.value}
    if done.turn_id:
        out["turnId"] = done.turn_id
    compactions = done.outcome.turn.get("compactions", [])
    out["compacted"] = any("replacedMessages" in c for c in compactions)
    return out


async def session_rewind(ctx: CallContext, params: RewindParams) -> dict[str, Any]:
    """Files and/or conversation back to before a turn (R-T12); `session_busy` while one runs."""
    actor = await session_for(ctx, params.session_id, Access.DRIVE)
    reply: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    actor.send(Rewind(params.to_turn_id, params.files, reply))
    return await reply
