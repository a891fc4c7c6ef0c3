"""A session's settings: `session/set_mode` and `session/set_config_option` (mode, plan, model,
agent). `plan` is the plan gate, apart from the permission mode: `on` / `off`."""

from __future__ import annotations

import asyncio
from typing import Any

from agentd.core import PermissionMode
from agentd.protocol import RpcError, SetConfigOptionParams, SetModeParams
from agentd.session import PLAN_OFF, PLAN_ON, SetAgent, SetMode, SetModel, SetPlan
from agentd.transport.handlers.common import config_options, known_agent, session_for
from agentd.transport.sharing import Access
from agentd.transport.state import CallContext


async def session_set_config_option(ctx: CallContext, params: SetConfigOptionParams) -> dict[str, Any]:
    actor = await session_for(ctx, params.session_id, Access.DRIVE)
    since = ctx.state.writer.mark()
    loop = asyncio.get_running_loop()
    if params.config_id == "mode":
        await session_set_mode(ctx, SetModeParams(session_id=params.session_id, mode_id=str(params.value)))
    elif params.config_id == "plan":
        if params.value not in (PLAN_ON, PLAN_OFF):
            msg = f"plan is {PLAN_ON!r} or {PLAN_OFF!r}, not {params.value!r}"
            data = [{"path": "value", "message": msg}]
            raise RpcError.invalid_params(f"Invalid params: value: {msg}", data)
        reply_plan: asyncio.Future[None] = loop.create_future()
        actor.send(SetPlan(params.value == PLAN_ON, reply_plan))
        await reply_plan
    elif params.config_id == "model":
        choices = next(o for o in actor.config_options() if o["id"] == "model")["options"]
        known = [c["value"] for c in choices]
        if params.value not in known:
            msg = f"unknown model {params.value!r} (one of {', '.join(known)})"
            data = [{"path": "value", "message": msg}]
            raise RpcError.invalid_params(f"Invalid params: value: {msg}", data)
        reply_model: asyncio.Future[None] = loop.create_future()
        actor.send(SetModel(str(params.value), reply_model))
        await reply_model
    elif params.config_id == "agent":
        name = known_agent(ctx, params.value, "value")
        reply: asyncio.Future[None] = loop.create_future()
        actor.send(SetAgent(name, reply))
        await reply
    else:
        msg = f"unknown config option {params.config_id!r} (mode, plan, model, agent)"
        raise RpcError.invalid_params(
            f"Invalid params: configId: {msg}", [{"path": "configId", "message": msg}]
        )
    # Stored (else a retryable error), and every client saw config_option_update, first.
    await ctx.state.writer.require_committed(actor.id, since)
    return {"configOptions": config_options(ctx, actor)}


async def session_set_mode(ctx: CallContext, params: SetModeParams) -> dict[str, Any]:
    try:
        mode = PermissionMode(params.mode_id)
    except ValueError:
        known = ", ".join(m.value for m in PermissionMode)
        raise RpcError.invalid_params(
            f"Invalid params: unknown mode {params.mode_id!r} (one of {known})"
        ) from None
    actor = await session_for(ctx, params.session_id, Access.DRIVE)
    since = ctx.state.writer.mark()
    reply: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    actor.send(SetMode(mode, reply))
    await reply
    # Stored (else a retryable error), and clients saw current_mode_update, before the answer.
    await ctx.state.writer.require_committed(actor.id, since)
    return {}
