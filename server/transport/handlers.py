"""The ACP methods agentd implements (R-P2), as `Method` entries for the dispatcher."""

from __future__ import annotations

import asyncio
import base64
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from protocol.acp import (
    PROTOCOL_VERSION,
    AuthenticateParams,
    InitializeParams,
    ListSessionsParams,
    LoadSessionParams,
    NewSessionParams,
    PromptParams,
    SessionIdParams,
    SetConfigOptionParams,
    SetModeParams,
)
from protocol.agentd import (
    ATTACH,
    COMPACT,
    DETACH,
    ENQUEUE,
    FORK,
    GOAL_CLEAR,
    GOAL_GET,
    GOAL_SET,
    HOOKS_REGISTER,
    INTERJECT,
    PERMISSION_RESPOND,
    QUEUE_OPS,
    SEND_NOW,
    USAGE_GET,
    AttachParams,
    EnqueueParams,
    ForkParams,
    GoalSetParams,
    HooksRegisterParams,
    InterjectParams,
    PermissionRespondParams,
    QueueOpParams,
    SessionParams,
)
from protocol.jsonrpc import ErrorCode, RpcError
from server import __version__
from server.config import AuthMode, PermissionMode
from server.loop.outcome import OutcomeKind, stop_reason
from server.session.actor import SessionActor
from server.session.commands import (
    AttachMcp,
    Cancel,
    Compact,
    EnqueueAck,
    GoalClear,
    GoalGet,
    GoalSet,
    Interject,
    InterjectResult,
    Prompt,
    PromptDone,
    QueueOp,
    RegisterHook,
    SetAgent,
    SetMode,
    SetModel,
)
from server.session.config_options import MODES
from server.tools.mcp import McpConnections, McpError, parse_specs
from server.tools.mcp_policy import check_mcp_specs
from server.transport.client_hooks import STOP_HOOK_METHOD, ClientStopHook
from server.transport.guards import check_prompt_size, limit_exceeded
from server.transport.rpc import CallContext, Method
from server.transport.workspace_policy import check_contained

EXTENSIONS: list[str] = [
    ATTACH,
    FORK,
    ENQUEUE,
    SEND_NOW,
    *(f"_agentd/queue/{op}" for op in QUEUE_OPS),
    DETACH,
    "_agentd/session/snapshot",
    "_agentd/resync_required",
    INTERJECT,
    COMPACT,
    USAGE_GET,
    GOAL_SET,
    GOAL_GET,
    GOAL_CLEAR,
    HOOKS_REGISTER,
    "_agentd/event",
    "_agentd/permission/resolved",
    PERMISSION_RESPOND,
]


def modes_state(actor: SessionActor) -> dict[str, Any]:
    return {"currentModeId": actor.mode().value, "availableModes": MODES}


async def _session(ctx: CallContext, session_id: str) -> SessionActor:
    actor = await ctx.state.manager.get(session_id)
    if actor is None or actor.owner != ctx.principal:
        # Someone else's session looks exactly like a missing one (R-X2).
        raise RpcError.not_found(f"session {session_id}")
    return actor


async def _check_cwd(ctx: CallContext, cwd: str) -> str:
    return await asyncio.to_thread(_check_cwd_sync, ctx, cwd)


def _check_cwd_sync(ctx: CallContext, cwd: str) -> str:
    resolved = check_contained(ctx.state.settings, ctx.principal, cwd)  # per principal with auth
    if not resolved.is_dir():
        msg = f"{cwd} is not an existing directory"
        raise RpcError.invalid_params(f"Invalid params: cwd: {msg}", [{"path": "cwd", "message": msg}])
    return str(resolved)


async def _check_loaded_cwd(ctx: CallContext, actor: SessionActor, cwd: str | Path) -> None:
    """With auth, neither the session's own cwd (a grant may have been withdrawn since)
    nor the one asked for may lie outside the principal's roots."""
    if ctx.state.settings.auth is not AuthMode.NONE:
        for path in (actor.cwd, cwd):
            await asyncio.to_thread(check_contained, ctx.state.settings, ctx.principal, path)


async def initialize(ctx: CallContext, params: InitializeParams) -> dict[str, Any]:
    if ctx.connection is not None:
        ctx.connection.client_capabilities = params.client_capabilities
        ctx.connection.initialized = True
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": True, "sse": False},
            "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}},
        },
        "authMethods": [],
        "agentInfo": {"name": "agentd", "title": "agentd", "version": __version__},
        "_meta": {"agentd": {"extensions": EXTENSIONS}},
    }


async def authenticate(ctx: CallContext, params: AuthenticateParams) -> dict[str, Any]:
    raise RpcError.invalid_params(
        f"Invalid params: unknown auth method {params.method_id!r} (none are offered)"
    )


async def _attach_with_replay(ctx: CallContext, actor: SessionActor, *, replay: bool) -> None:
    """Subscribe this connection; replay history first if asked, with no gap or duplicate."""
    conn = ctx.connection
    assert conn is not None
    await ctx.state.attach(actor, conn, replay="acp" if replay else "none")


def _agentd_meta(meta: Any) -> dict[str, Any]:
    inner = meta.get("agentd") if isinstance(meta, dict) else None
    return inner if isinstance(inner, dict) else {}


def config_options(ctx: CallContext, actor: SessionActor) -> list[dict[str, Any]]:
    """Mode, model and agent as ACP config options (ACP v1 has no set_model)."""
    return actor.config_options()


def _known_agent(ctx: CallContext, name: Any, path: str) -> str:
    if not isinstance(name, str) or name not in ctx.state.agents:
        known = ", ".join(sorted(ctx.state.agents))
        msg = f"unknown agent {name!r} (one of {known})"
        raise RpcError.invalid_params(f"Invalid params: {path}: {msg}", [{"path": path, "message": msg}])
    return name


async def session_new(ctx: CallContext, params: NewSessionParams) -> dict[str, Any]:
    cwd = await _check_cwd(ctx, params.cwd)
    limit = ctx.state.settings.max_sessions_per_principal
    if limit and await ctx.state.store.count_sessions(ctx.principal) >= limit:
        raise limit_exceeded(
            "sessions", limit, f"session limit reached: {limit} sessions (delete some first)"
        )
    meta = _agentd_meta(params.meta)
    agent = _known_agent(ctx, meta["agent"], "_meta.agentd.agent") if "agent" in meta else "default"
    mcp = await _start_mcp(ctx, params.mcp_servers)  # first: a server that fails creates nothing
    try:
        actor = await ctx.state.manager.create(cwd=cwd, owner=ctx.principal, agent=agent)
    except BaseException:
        if mcp is not None:
            await mcp.close()
        raise
    if mcp is not None:
        await _attach_mcp(actor, mcp)
    if ctx.connection is not None:
        await _attach_with_replay(ctx, actor, replay=False)
    return {"sessionId": actor.id, "modes": modes_state(actor), "configOptions": config_options(ctx, actor)}


async def _start_mcp(ctx: CallContext, raw: list[dict[str, Any]]) -> McpConnections | None:
    """Connect the requested MCP servers (R-T9); a bad spec or a server that does not
    start is an invalid-params error naming it."""
    if not raw:
        return None
    try:
        specs = parse_specs(raw)
        check_mcp_specs(specs, ctx.state.settings)  # with auth: only what the operator allowed
    except ValueError as exc:
        raise RpcError.invalid_params(f"Invalid params: {exc}") from None
    conns = McpConnections(specs, ctx.state.settings.home / "logs")
    try:
        await conns.start()
    except McpError as exc:
        raise RpcError.invalid_params(f"Invalid params: mcpServers: {exc}", {"kind": "mcp_spawn"}) from None
    return conns


async def _attach_mcp(actor: SessionActor, conns: McpConnections) -> None:
    reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    actor.send(AttachMcp(conns, reply))
    previous = await reply
    if previous is not None:
        await previous.close()


async def session_set_config_option(ctx: CallContext, params: SetConfigOptionParams) -> dict[str, Any]:
    actor = await _session(ctx, params.session_id)
    loop = asyncio.get_running_loop()
    if params.config_id == "mode":
        await session_set_mode(ctx, SetModeParams(session_id=params.session_id, mode_id=str(params.value)))
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
        name = _known_agent(ctx, params.value, "value")
        reply: asyncio.Future[None] = loop.create_future()
        actor.send(SetAgent(name, reply))
        await reply
    else:
        msg = f"unknown config option {params.config_id!r} (mode, model, agent)"
        raise RpcError.invalid_params(
            f"Invalid params: configId: {msg}", [{"path": "configId", "message": msg}]
        )
    await ctx.state.writer.barrier()  # every client sees config_option_update before the answer
    return {"configOptions": config_options(ctx, actor)}


async def goal_set(ctx: CallContext, params: GoalSetParams) -> dict[str, Any]:
    actor = await _session(ctx, params.session_id)
    reply: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    actor.send(GoalSet(params.objective, params.token_budget, params.verify, reply))
    return {"goal": await reply}


async def goal_get(ctx: CallContext, params: SessionParams) -> dict[str, Any]:
    actor = await _session(ctx, params.session_id)
    reply: asyncio.Future[dict[str, Any] | None] = asyncio.get_running_loop().create_future()
    actor.send(GoalGet(reply))
    goal = await reply
    return {"goal": goal} if goal else {}


async def goal_clear(ctx: CallContext, params: SessionParams) -> dict[str, Any]:
    actor = await _session(ctx, params.session_id)
    reply: asyncio.Future[dict[str, Any] | None] = asyncio.get_running_loop().create_future()
    actor.send(GoalClear(reply))
    previous = await reply
    return {"cleared": previous} if previous else {}


async def session_resume(ctx: CallContext, params: LoadSessionParams) -> dict[str, Any]:
    """Like `session/load` without the replay: the client already has the history."""
    actor = await _session(ctx, params.session_id)
    await _check_loaded_cwd(ctx, actor, params.cwd)
    await _attach_with_replay(ctx, actor, replay=False)
    return {"modes": modes_state(actor), "configOptions": config_options(ctx, actor)}


async def session_close(ctx: CallContext, params: SessionIdParams) -> dict[str, Any]:
    """Cancel what runs and free the session's live resources; it stays stored and can be
    loaded or resumed again."""
    actor = await _session(ctx, params.session_id)
    cleared: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    actor.send(QueueOp("clear", {}, ctx.principal, cleared))  # a closed session runs nothing later
    actor.send(Cancel())
    await cleared
    if ctx.connection is not None:
        ctx.connection.sessions.discard(actor.id)
    await ctx.state.manager.evict(actor.id)
    return {}


async def session_delete(ctx: CallContext, params: SessionIdParams) -> dict[str, Any]:
    actor = await _session(ctx, params.session_id)
    if ctx.connection is not None:
        ctx.connection.sessions.discard(actor.id)
    await ctx.state.manager.delete(actor.id)
    return {}


async def session_fork(ctx: CallContext, params: ForkParams) -> dict[str, Any]:
    """A new session with this one's history up to a seq (R-P3)."""
    actor = await _session(ctx, params.session_id)
    await _check_loaded_cwd(ctx, actor, actor.cwd)  # the fork works where the session does
    await ctx.state.writer.barrier()  # everything emitted so far is in the store
    last = actor.last_seq
    up_to = last if params.up_to_seq is None else params.up_to_seq
    if up_to > last:
        msg = f"upToSeq {up_to} is beyond the session's last seq {last}"
        raise RpcError.invalid_params(
            f"Invalid params: upToSeq: {msg}", [{"path": "upToSeq", "message": msg}]
        )
    # A concurrent session/delete may win: then the fork fails as "not found", creating nothing.
    record = await ctx.state.manager.record(actor.id)
    fork = await ctx.state.manager.fork(record, up_to) if record is not None else None
    if fork is None:
        raise RpcError.not_found(f"session {params.session_id}")
    return {"sessionId": fork.id, "forkedFrom": actor.id, "upToSeq": up_to}


async def _submit(ctx: CallContext, params: EnqueueParams, *, send_now: bool) -> dict[str, Any]:
    check_prompt_size(params.prompt, ctx.state.settings.max_prompt_bytes)
    actor = await _session(ctx, params.session_id)
    loop = asyncio.get_running_loop()
    ack: asyncio.Future[EnqueueAck] = loop.create_future()
    actor.send(
        Prompt(
            blocks=list(params.prompt),
            reply=loop.create_future(),  # answered at its turn's end; nobody waits here
            origin=ctx.connection.id if ctx.connection else None,
            meta=_agentd_meta(params.meta),
            principal=ctx.principal,
            send_now=send_now,
            ack=ack,
        )
    )
    answer = await ack
    if answer.done is None:
        return {"promptId": answer.prompt_id, "position": answer.position}
    # A repeated requestId whose prompt already ended: how it ended.
    outcome = answer.done.outcome
    ended: dict[str, Any] = {
        "promptId": answer.prompt_id,
        "stopReason": stop_reason(outcome).value,
        "outcome": outcome.kind.value,
    }
    if answer.done.turn_id:
        ended["turnId"] = answer.done.turn_id
    if outcome.reason:
        ended["reason"] = outcome.reason
    return ended


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
        actor = await _session(ctx, params.session_id)
        reply: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        actor.send(QueueOp(op, args, ctx.principal, reply))
        return await reply

    return Method(QueueOpParams, handler)


async def session_attach(ctx: CallContext, params: AttachParams) -> dict[str, Any]:
    """R-E3: a snapshot (also sent first as `_agentd/session/snapshot`), every durable event
    after `afterSeq`, the text of a message still streaming, then live traffic."""
    actor = await _session(ctx, params.session_id)
    assert ctx.connection is not None
    sub = await ctx.state.attach(actor, ctx.connection, replay="attach", after_seq=params.after_seq)
    return {"snapshot": sub.snapshot}


async def session_detach(ctx: CallContext, params: SessionParams) -> dict[str, Any]:
    assert ctx.connection is not None
    if params.session_id in ctx.connection.sessions:
        ctx.connection.sessions.discard(params.session_id)
        await ctx.state.detach(params.session_id, ctx.connection.id)
        return {"detached": True}
    return {"detached": False}


async def hooks_register(ctx: CallContext, params: HooksRegisterParams) -> dict[str, Any]:
    unknown = [e for e in params.events if e != "stop"]
    if unknown:
        msg = f"unknown hook events {unknown} (only 'stop')"
        raise RpcError.invalid_params(f"Invalid params: events: {msg}", [{"path": "events", "message": msg}])
    actor = await _session(ctx, params.session_id)
    assert ctx.connection is not None
    if actor.id not in ctx.connection.sessions:
        await _attach_with_replay(ctx, actor, replay=False)
    reply: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    hook = ClientStopHook(ctx.connection, ctx.state.settings.client_hook_timeout_s)
    actor.send(RegisterHook(hook, reply))
    await reply
    return {"registered": ["stop"], "method": STOP_HOOK_METHOD}


async def session_load(ctx: CallContext, params: LoadSessionParams) -> dict[str, Any]:
    actor = await _session(ctx, params.session_id)
    await _check_loaded_cwd(ctx, actor, params.cwd)
    # New servers replace the session's; none keeps what another client connected.
    mcp = await _start_mcp(ctx, params.mcp_servers)
    if mcp is not None:
        await _attach_mcp(actor, mcp)
    await _attach_with_replay(ctx, actor, replay=True)
    return {"modes": modes_state(actor), "configOptions": config_options(ctx, actor)}


def _encode_cursor(at: datetime, sid: str) -> str:
    return base64.urlsafe_b64encode(orjson.dumps([at.isoformat(), sid])).decode()


def _decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        at, sid = orjson.loads(base64.urlsafe_b64decode(cursor.encode()))
        return datetime.fromisoformat(at), str(sid)
    except Exception:
        raise RpcError.invalid_params("Invalid params: cursor is not one this server issued") from None


async def session_list(ctx: CallContext, params: ListSessionsParams) -> dict[str, Any]:
    page = 50
    before = _decode_cursor(params.cursor) if params.cursor else None
    # Sessions store their resolved cwd; filter by the same normal form.
    cwd = str(await asyncio.to_thread(Path(params.cwd).resolve)) if params.cwd else None
    rows = await ctx.state.manager.store.list_sessions(
        owner=ctx.principal, cwd=cwd, before=before, limit=page + 1
    )
    result: dict[str, Any] = {
        "sessions": [
            {
                "sessionId": r.id,
                "cwd": r.cwd,
                **({"title": r.title} if r.title else {}),
                "updatedAt": r.updated_at.isoformat(),
            }
            for r in rows[:page]
        ]
    }
    if len(rows) > page:
        last = rows[page - 1]
        result["nextCursor"] = _encode_cursor(last.updated_at, last.id)
    return result


async def session_prompt(ctx: CallContext, params: PromptParams) -> dict[str, Any]:
    agentd_meta = (params.meta or {}).get("agentd") if isinstance(params.meta, dict) else None
    agentd_meta = agentd_meta if isinstance(agentd_meta, dict) else {}
    if "outputSchema" in agentd_meta and not isinstance(agentd_meta["outputSchema"], dict):
        msg = "outputSchema must be a JSON Schema object"
        raise RpcError.invalid_params(
            f"Invalid params: _meta.agentd.outputSchema: {msg}",
            [{"path": "_meta.agentd.outputSchema", "message": msg}],
        )
    check_prompt_size(params.prompt, ctx.state.settings.max_prompt_bytes)
    actor = await _session(ctx, params.session_id)
    conn = ctx.connection
    if conn is not None and actor.id not in conn.sessions:
        await _attach_with_replay(ctx, actor, replay=False)
    reply = asyncio.get_running_loop().create_future()
    actor.send(
        Prompt(
            blocks=list(params.prompt),
            reply=reply,
            origin=conn.id if conn else None,
            meta=agentd_meta,
        )
    )
    done = await reply
    outcome = done.outcome
    meta: dict[str, Any] = {"promptId": done.prompt_id, "outcome": outcome.kind.value}
    if done.turn_id:
        meta["turnId"] = done.turn_id
    if outcome.reason:
        meta["reason"] = outcome.reason
    if outcome.structured_output is not None:
        meta["structuredOutput"] = outcome.structured_output
    if "usage" in outcome.turn:
        meta["usage"] = outcome.turn["usage"]  # this prompt's tokens and cost (R-R4)
    if outcome.kind is OutcomeKind.FAILED:
        err = outcome.error
        raise RpcError(
            ErrorCode.TURN_FAILED,
            f"The turn failed: {err.message if err else 'unknown error'}",
            {"kind": err.kind.value if err else "internal", **meta},
        )
    return {"stopReason": stop_reason(outcome).value, "_meta": {"agentd": meta}}


async def session_cancel(ctx: CallContext, params: SessionIdParams) -> None:
    actor = await _session(ctx, params.session_id)
    actor.send(Cancel())


async def session_set_mode(ctx: CallContext, params: SetModeParams) -> dict[str, Any]:
    try:
        mode = PermissionMode(params.mode_id)
    except ValueError:
        known = ", ".join(m.value for m in PermissionMode)
        raise RpcError.invalid_params(
            f"Invalid params: unknown mode {params.mode_id!r} (one of {known})"
        ) from None
    actor = await _session(ctx, params.session_id)
    reply: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    actor.send(SetMode(mode, reply))
    await reply
    await ctx.state.writer.barrier()  # clients see current_mode_update before the response
    return {}


async def interject(ctx: CallContext, params: InterjectParams) -> dict[str, Any]:
    check_prompt_size(params.prompt, ctx.state.settings.max_prompt_bytes)
    actor = await _session(ctx, params.session_id)
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


async def session_compact(ctx: CallContext, params: SessionParams) -> dict[str, Any]:
    actor = await _session(ctx, params.session_id)
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


async def usage_get(ctx: CallContext, params: SessionParams) -> dict[str, Any]:
    """The session's usage ledger (R-R4): tokens, cost, per lane; `dirty` when some call's
    final usage could not be read."""
    actor = await _session(ctx, params.session_id)
    return {"sessionId": actor.id, "session": actor.usage.to_dict()}


async def permission_respond(ctx: CallContext, params: PermissionRespondParams) -> dict[str, Any]:
    """First answer wins, as among WebSocket clients; every client then gets
    `_agentd/permission/resolved`."""
    actor = await _session(ctx, params.session_id)
    won = actor.answer_permission(params.request_id, params.option_id)
    if won is None:
        offered = ", ".join(actor.permission_options(params.request_id) or [])
        raise RpcError.invalid_params(
            f"Invalid params: optionId {params.option_id!r} is not offered by {params.request_id} "
            f"(one of {offered})",
            [{"path": "optionId", "message": f"one of {offered}"}],
        )
    if not won:
        raise RpcError.invalid_params(
            f"Invalid params: no pending permission request {params.request_id} in this session "
            "(already answered, cancelled, or never asked)",
            [{"path": "requestId", "message": "not pending"}],
        )
    return {"outcome": "selected", "optionId": params.option_id}


# ACP methods of the pinned schema that agentd answers "not supported" (and does not
# advertise), with the reason the client is told.
UNSUPPORTED: dict[str, str] = {
    "logout": "agentd authenticates each connection with a bearer token, not a login session "
    "(an operator revokes a token with `agentd token revoke`)",
}

METHODS: dict[str, Method] = {
    ENQUEUE: Method(EnqueueParams, prompt_enqueue),
    SEND_NOW: Method(EnqueueParams, prompt_send_now),
    **{f"_agentd/queue/{op}": queue_method(op) for op in QUEUE_OPS},
    "session/resume": Method(LoadSessionParams, session_resume, needs_connection=True),
    "session/close": Method(SessionIdParams, session_close),
    "session/delete": Method(SessionIdParams, session_delete),
    FORK: Method(ForkParams, session_fork),
    ATTACH: Method(AttachParams, session_attach, needs_connection=True),
    DETACH: Method(SessionParams, session_detach, needs_connection=True),
    GOAL_SET: Method(GoalSetParams, goal_set),
    GOAL_GET: Method(SessionParams, goal_get),
    GOAL_CLEAR: Method(SessionParams, goal_clear),
    HOOKS_REGISTER: Method(HooksRegisterParams, hooks_register, needs_connection=True),
    "session/set_config_option": Method(SetConfigOptionParams, session_set_config_option),
    USAGE_GET: Method(SessionParams, usage_get),
    COMPACT: Method(SessionParams, session_compact),
    INTERJECT: Method(InterjectParams, interject),
    PERMISSION_RESPOND: Method(PermissionRespondParams, permission_respond),
    "initialize": Method(InitializeParams, initialize),
    "authenticate": Method(AuthenticateParams, authenticate),
    "session/new": Method(NewSessionParams, session_new),
    "session/load": Method(LoadSessionParams, session_load, needs_connection=True),
    "session/list": Method(ListSessionsParams, session_list),
    "session/prompt": Method(PromptParams, session_prompt),
    "session/cancel": Method(SessionIdParams, session_cancel),
    "session/set_mode": Method(SetModeParams, session_set_mode),
}
