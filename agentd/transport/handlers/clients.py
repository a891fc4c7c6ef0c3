"""What a connected client subscribes to and answers: `_agentd/session/attach|detach`, client
stop hooks (`_agentd/hooks/register`) and permission answers (`_agentd/permission/respond`)."""

from __future__ import annotations

import asyncio
from typing import Any

from agentd.protocol import (
    AttachParams,
    ClientRequest,
    HooksRegisterParams,
    PermissionRespondParams,
    RpcError,
    SessionParams,
)
from agentd.session import RegisterHook, ReplayMode
from agentd.transport.client_hooks import ClientStopHook
from agentd.transport.handlers.common import attach_with_replay, session_for, subscriber
from agentd.transport.handlers.remote import attach_remote, here_or_owner
from agentd.transport.sharing import Access
from agentd.transport.state import CallContext


async def session_attach(ctx: CallContext, params: AttachParams) -> dict[str, Any]:
    """R-E3: a snapshot (also sent first as `_agentd/session/snapshot`), every durable event
    after `afterSeq`, the text of a message still streaming, then live traffic."""
    found = await here_or_owner(ctx, params.session_id, Access.WATCH)
    if isinstance(found, str):  # another replica runs it: served here from the log (R-C1)
        sub, _ = await attach_remote(
            ctx, params.session_id, found, replay=ReplayMode.ATTACH, after_seq=params.after_seq
        )
        return {"snapshot": sub.snapshot}
    actor, access = found
    sub = await ctx.state.attach(actor, subscriber(ctx, access), replay="attach", after_seq=params.after_seq)
    return {"snapshot": sub.snapshot}


async def session_detach(ctx: CallContext, params: SessionParams) -> dict[str, Any]:
    assert ctx.connection is not None
    if params.session_id in ctx.connection.sessions:
        ctx.connection.sessions.discard(params.session_id)
        await ctx.state.detach(params.session_id, ctx.connection.id)
        return {"detached": True}
    return {"detached": False}


# The hook events a client may register for: Stop (the session's agent), SubagentStop (a
# sub-agent's) and UserPromptSubmit (a user's prompt starting a turn), all asked with the same
# request; the payload's "event" tells them apart.
HOOK_EVENTS = ("stop", "subagent_stop", "user_prompt_submit")


async def hooks_register(ctx: CallContext, params: HooksRegisterParams) -> dict[str, Any]:
    unknown = [e for e in params.events if e not in HOOK_EVENTS]
    if unknown or not params.events:
        msg = f"unknown hook events {unknown} (use 'stop', 'subagent_stop', 'user_prompt_submit')"
        raise RpcError.invalid_params(f"Invalid params: events: {msg}", [{"path": "events", "message": msg}])
    actor = await session_for(ctx, params.session_id, Access.DRIVE)  # the hook steers turns
    assert ctx.connection is not None
    if actor.id not in ctx.connection.sessions:
        await attach_with_replay(ctx, actor, replay=False)
    reply: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    hook = ClientStopHook(ctx.connection, ctx.state.settings.client_hook_timeout_s)
    events = [e for e in HOOK_EVENTS if e in params.events]
    actor.send(RegisterHook(hook, reply, frozenset(events)))
    await reply
    return {"registered": events, "method": ClientRequest.HOOKS_STOP.value}


async def permission_respond(ctx: CallContext, params: PermissionRespondParams) -> dict[str, Any]:
    """First answer wins, as among WebSocket clients; every client then gets
    `_agentd/permission/resolved`."""
    actor = await session_for(ctx, params.session_id, Access.DRIVE)
    # Answered only once the answer is in the store (issue 26): its resolution, taken now.
    resolution = actor.permission_resolution(params.request_id)
    if params.outcome == "cancelled" or params.option_id is None:
        if not actor.cancel_permission(params.request_id):
            raise _not_pending(params.request_id)
        await actor.permission_saved(resolution)
        return {"outcome": "cancelled"}
    won = actor.answer_permission(params.request_id, params.option_id)
    if won is None:
        offered = ", ".join(actor.permission_options(params.request_id) or [])
        raise RpcError.invalid_params(
            f"Invalid params: optionId {params.option_id!r} is not offered by {params.request_id} "
            f"(one of {offered})",
            [{"path": "optionId", "message": f"one of {offered}"}],
        )
    if not won:
        raise _not_pending(params.request_id)
    await actor.permission_saved(resolution)
    return {"outcome": "selected", "optionId": params.option_id}


def _not_pending(request_id: str) -> RpcError:
    return RpcError.invalid_params(
        f"Invalid params: no pending permission request {request_id} in this session "
        "(already answered, cancelled, or never asked)",
        [{"path": "requestId", "message": "not pending"}],
    )
