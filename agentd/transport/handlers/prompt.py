"""Prompts and the queue: `session/prompt`, `session/cancel`, `_agentd/prompt/enqueue|send_now`,
`_agentd/interject` and the `_agentd/queue/<op>` family."""

from __future__ import annotations

import asyncio
from typing import Any

import agentd.session as session_face
from agentd.core import enqueue_result, prompt_failure, prompt_result
from agentd.protocol import (
    EnqueueParams,
    ErrorCode,
    InterjectParams,
    PromptParams,
    QueueOpParams,
    RpcError,
    SessionIdParams,
)
from agentd.session import (
    ROUTED_FROM,
    Cancel,
    EnqueueAck,
    Interject,
    InterjectResult,
    Prompt,
    QueueOp,
)
from agentd.transport.guards import check_prompt_size
from agentd.transport.handlers.common import agentd_meta, attach_with_replay, session_for
from agentd.transport.rpc import Method
from agentd.transport.sharing import Access
from agentd.transport.state import CallContext

TRACE_CONTEXT = ("traceparent", "tracestate")


def _prompt_meta(ctx: CallContext, meta: Any) -> dict[str, Any]:
    """`_meta.agentd` of a prompt; `routedFrom` only as the forwarding replica set it."""
    inner = agentd_meta(meta)
    if ROUTED_FROM in inner and not ctx.routed:
        inner = {k: v for k, v in inner.items() if k != ROUTED_FROM}
    if isinstance(meta, dict):  # W3C trace context (`_meta.traceparent`): the turn's parent span
        trace = {k: meta[k] for k in TRACE_CONTEXT if isinstance(meta.get(k), str)}
        if trace:
            inner = {**inner, **trace}
    return inner


async def session_prompt(ctx: CallContext, params: PromptParams) -> dict[str, Any]:
    meta = params.meta  # (most prompts carry no `_meta`: no walk of it then)
    agentd_meta = {} if meta is None else _prompt_meta(ctx, meta)
    if "outputSchema" in agentd_meta and not isinstance(agentd_meta["outputSchema"], dict):
        msg = "outputSchema must be a JSON Schema object"
        raise RpcError.invalid_params(
            f"Invalid params: _meta.agentd.outputSchema: {msg}",
            [{"path": "_meta.agentd.outputSchema", "message": msg}],
        )
    check_prompt_size(params.prompt, ctx.state.settings.max_prompt_bytes)
    actor = await session_for(ctx, params.session_id, Access.DRIVE)
    conn = ctx.connection
    if conn is not None and actor.id not in conn.sessions:
        await attach_with_replay(ctx, actor, replay=False)
    reply = asyncio.get_running_loop().create_future()
    actor.send(
        Prompt(
            blocks=list(params.prompt),
            reply=reply,
            origin=conn.id if conn else None,
            meta=agentd_meta,
        )
    )
    # Looked up here, not at import: the outcome types come with the first session (start-up
    # stays lean); an attribute of the face, not an import statement, once per turn.
    ended = session_face.ended_turn(await reply)
    failure = prompt_failure(ended)
    if failure is not None:
        raise RpcError(ErrorCode.TURN_FAILED, *failure)
    return prompt_result(ended)


async def session_cancel(ctx: CallContext, params: SessionIdParams) -> None:
    actor = await session_for(ctx, params.session_id, Access.DRIVE)
    actor.send(Cancel())


async def _submit(ctx: CallContext, params: EnqueueParams, *, send_now: bool) -> dict[str, Any]:
    check_prompt_size(params.prompt, ctx.state.settings.max_prompt_bytes)
    actor = await session_for(ctx, params.session_id, Access.DRIVE)
    loop = asyncio.get_running_loop()
    ack: asyncio.Future[EnqueueAck] = loop.create_future()
    actor.send(
        Prompt(
            blocks=list(params.prompt),
            reply=loop.create_future(),  # answered at its turn's end; nobody waits here
            origin=ctx.connection.id if ctx.connection else None,
            meta=_prompt_meta(ctx, params.meta),
            principal=ctx.principal,
            send_now=send_now,
            ack=ack,
        )
    )
    answer = await ack
    if answer.done is None:
        return {"promptId": answer.prompt_id, "position": answer.position}
    # A repeated requestId whose prompt already ended: how it ended.
    from agentd.session import ended_turn

    return enqueue_result(ended_turn(answer.done))


async def prompt_enqueue(ctx: CallContext, params: EnqueueParams) -> dict[str, Any]:
    """Queue a prompt and answer at once with `{promptId, position}` (position 0 = running
    now); its progress and end arrive as events. HTTP-friendly."""
    return await _submit(ctx, params, send_now=False)


async def prompt_send_now(ctx: CallContext, params: EnqueueParams) -> dict[str, Any]:
    """Run this next: right behind the running turn, which is cancelled unless a goal is
    active (R-S3)."""
    return await _submit(ctx, params, send_now=True)


_QUEUE_ARGS = {
    "remove": ("id", "expectedVersion"),
    "edit": ("id", "expectedVersion", "text"),
    "move": ("order",),
    "hold": ("id",),
    "release": ("id",),
    "interject": ("id",),
}


def queue_method(op: str) -> Method:
    async def handler(ctx: CallContext, params: QueueOpParams) -> dict[str, Any]:
        args = params.model_dump(by_alias=True, exclude_none=True)
        missing = [a for a in _QUEUE_ARGS.get(op, ()) if a not in args]
        if missing:
            msg = f"{op} needs {', '.join(missing)}"
            raise RpcError.invalid_params(
                f"Invalid params: {msg}", [{"path": m, "message": "required"} for m in missing]
            )
        # Reading the queue is watching; every other operation changes it (drive).
        needs = Access.WATCH if op == "list" else Access.DRIVE
        actor = await session_for(ctx, params.session_id, needs)
        reply: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        actor.send(QueueOp(op, args, ctx.principal, reply))
        return await reply

    return Method(QueueOpParams, handler)


async def interject(ctx: CallContext, params: InterjectParams) -> dict[str, Any]:
    check_prompt_size(params.prompt, ctx.state.settings.max_prompt_bytes)
    actor = await session_for(ctx, params.session_id, Access.DRIVE)
    reply: asyncio.Future[InterjectResult] = asyncio.get_running_loop().create_future()
    origin = ctx.connection.id if ctx.connection else None
    actor.send(Interject(list(params.prompt), reply, params.expected_turn_id, origin))
    result = await reply
    if result.status == "turn_not_active":
        raise RpcError(
            ErrorCode.TURN_NOT_ACTIVE,
            f"turn_not_active: turn {params.expected_turn_id} is not running",
            {"reason": "turn_not_active", **({"runningTurnId": result.turn_id} if result.turn_id else {})},
        )
    out: dict[str, Any] = {"status": result.status}
    if result.turn_id:
        out["turnId"] = result.turn_id
    if result.prompt_id:
        out["promptId"] = result.prompt_id
    return out
