"""Session lifecycle: `initialize`, `authenticate`, `session/new|load|resume|list|close|delete`,
`_agentd/session/fork`, and the MCP servers a session is given."""

from __future__ import annotations

import asyncio
import base64
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from agentd.core import limit_exceeded
from agentd.protocol import (
    AuthenticateParams,
    ForkParams,
    InitializeParams,
    ListSessionsParams,
    LoadSessionParams,
    NewSessionParams,
    RpcError,
    SessionIdParams,
)
from agentd.session import AttachMcp, Cancel, QueueOp
from agentd.transport.early import accept_initialize, initialize_result
from agentd.transport.handlers.common import (
    agentd_meta,
    attach_with_replay,
    check_cwd,
    check_loaded_cwd,
    config_options,
    known_agent,
    modes_state,
    session_for,
)
from agentd.transport.handlers.ended import end_closed, end_deleted
from agentd.transport.handlers.models import catalogue_fresh
from agentd.transport.handlers.remote import here_or_owner, load_remote
from agentd.transport.handlers.session_info import live_listing, search_query
from agentd.transport.handlers.share import listing_meta
from agentd.transport.sharing import Access, denied
from agentd.transport.state import CallContext

if TYPE_CHECKING:
    from agentd.session import SessionActor
    from agentd.tools import McpConnections


async def initialize(ctx: CallContext, params: InitializeParams) -> dict[str, Any]:
    if ctx.connection is not None:
        accept_initialize(ctx.connection, params)
    return initialize_result()  # `agentd acp` answers with the same before it has loaded


async def authenticate(ctx: CallContext, params: AuthenticateParams) -> dict[str, Any]:
    raise RpcError.invalid_params(
        f"Invalid params: unknown auth method {params.method_id!r} (none are offered)"
    )


async def session_new(ctx: CallContext, params: NewSessionParams) -> dict[str, Any]:
    cwd = await check_cwd(ctx, params.cwd)
    limit = ctx.state.settings.max_sessions_per_principal
    if limit and await ctx.state.store.count_sessions(ctx.principal) >= limit:
        raise limit_exceeded(
            "sessions", limit, f"session limit reached: {limit} sessions (delete some first)"
        )
    meta = agentd_meta(params.meta)
    agent = known_agent(ctx, meta["agent"], "_meta.agentd.agent") if "agent" in meta else "default"
    # First: a refused spec creates nothing. A server that fails to start is left out (and
    # reported once the client follows the session); the others work.
    mcp = await _start_mcp(ctx, params.mcp_servers, Path(cwd))
    try:
        actor = await ctx.state.manager.create(cwd=cwd, owner=ctx.principal, agent=agent)
    except BaseException:
        if mcp is not None:
            await mcp.close()
        raise
    # Before the attach: waiting here lets the actor send the attached client its commands
    # ahead of this answer, for a session the client does not know yet.
    await catalogue_fresh(ctx)  # the model picker offers what the provider serves
    if ctx.connection is not None:
        await attach_with_replay(ctx, actor, replay=False)
    if mcp is not None:
        await _attach_mcp(actor, mcp)
    return {"sessionId": actor.id, "modes": modes_state(actor), "configOptions": config_options(ctx, actor)}


async def _start_mcp(ctx: CallContext, raw: list[dict[str, Any]], cwd: Path) -> McpConnections | None:
    """Connect the requested MCP servers (R-T9), stdio ones in the sandbox with `cwd` (the
    session's workspace) writable, all at once, each within its start timeout. A bad or
    refused spec is an invalid-params error naming it; a server that fails or times out is
    in the connections' `failures` (the session reports it as a notice)."""
    if not raw:
        return None
    from agentd.tools import McpConnections, check_mcp_specs, parse_specs

    try:
        specs = parse_specs(raw)
        check_mcp_specs(specs, ctx.state.settings)  # only what the operator allowed (any auth mode)
    except ValueError as exc:
        raise RpcError.invalid_params(f"Invalid params: {exc}", {"kind": "mcp_refused"}) from None
    settings = ctx.state.settings
    conns = McpConnections(
        specs,
        settings.home / "logs",
        shell=ctx.state.services.shell,
        cwd=cwd,
        unsandboxed=frozenset(settings.mcp_unsandboxed),
        start_timeout=settings.mcp_start_timeout_s,
    )
    await conns.start()
    return conns


async def _attach_mcp(actor: SessionActor, conns: McpConnections) -> None:
    reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    actor.send(AttachMcp(conns, reply))
    previous = await reply
    if previous is not None:
        await previous.close()


async def session_load(ctx: CallContext, params: LoadSessionParams) -> dict[str, Any]:
    found = await here_or_owner(ctx, params.session_id, Access.WATCH)
    if isinstance(found, str):  # another replica runs it: replayed and followed from the log (R-C1)
        return await load_remote(ctx, params.session_id, found, replay=True, mcp=bool(params.mcp_servers))
    actor, access = found
    if params.mcp_servers and access.rank < Access.DRIVE.rank:
        raise denied(params.session_id, access, Access.DRIVE)  # new MCP servers change the session
    await check_loaded_cwd(ctx, actor, params.cwd)
    # New servers replace the session's; none keeps what another client connected.
    mcp = await _start_mcp(ctx, params.mcp_servers, Path(actor.cwd))
    if mcp is not None:
        await _attach_mcp(actor, mcp)
    await catalogue_fresh(ctx)
    await attach_with_replay(ctx, actor, replay=True, access=access)
    return {"modes": modes_state(actor), "configOptions": config_options(ctx, actor)}


async def session_resume(ctx: CallContext, params: LoadSessionParams) -> dict[str, Any]:
    """Like `session/load` without the replay: the client already has the history."""
    found = await here_or_owner(ctx, params.session_id, Access.WATCH)
    if isinstance(found, str):
        return await load_remote(ctx, params.session_id, found, replay=False, mcp=False)
    actor, access = found
    await check_loaded_cwd(ctx, actor, params.cwd)
    await catalogue_fresh(ctx)
    await attach_with_replay(ctx, actor, replay=False, access=access)
    return {"modes": modes_state(actor), "configOptions": config_options(ctx, actor)}


async def session_close(ctx: CallContext, params: SessionIdParams) -> dict[str, Any]:
    """Cancel what runs and free the session's live resources; it stays stored and can be
    loaded or resumed again. The session's other clients here are told `session_closed`
    and detached (watchers on other replicas follow the log, which goes on)."""
    actor = await session_for(ctx, params.session_id, Access.DRIVE)
    caller = ctx.connection.id if ctx.connection is not None else None
    cleared: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    actor.send(QueueOp("clear", {}, ctx.principal, cleared))  # a closed session runs nothing later
    actor.send(Cancel())
    await cleared
    if ctx.connection is not None:
        ctx.connection.sessions.discard(actor.id)
    try:
        await ctx.state.manager.evict(actor.id)
    finally:  # stopped, or still stopping (a slow database): either way it sends nothing more
        await end_closed(ctx.state, actor.hub, actor.id, caller=caller)
    return {}


async def session_delete(ctx: CallContext, params: SessionIdParams) -> dict[str, Any]:
    """Stop the session's actor and delete it. Once that has committed, the other clients
    attached here are told `session_deleted` and detached; those of other replicas hear it
    from the commit's NOTIFY (store `delete_session`)."""
    actor = await session_for(ctx, params.session_id, Access.OWNER)
    caller = ctx.connection.id if ctx.connection is not None else None
    if ctx.connection is not None:
        ctx.connection.sessions.discard(actor.id)
    if await ctx.state.manager.delete(actor.id):
        await end_deleted(ctx.state, actor.hub, actor.id, caller=caller)
    return {}


async def session_fork(ctx: CallContext, params: ForkParams) -> dict[str, Any]:
    """A new session with this one's history up to a seq (R-P3)."""
    actor = await session_for(ctx, params.session_id, Access.OWNER)
    await check_loaded_cwd(ctx, actor, actor.cwd)  # the fork works where the session does
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
    query = search_query(params.meta)  # `_meta.agentd.query`: title or cwd contains it
    rows = await ctx.state.manager.store.list_sessions(
        owner=ctx.principal, cwd=cwd, before=before, limit=page + 1, teams=ctx.teams, query=query
    )
    meta = await listing_meta(ctx, rows[:page])  # owner, access, shares (R-X2)
    live = live_listing(ctx, rows[:page])  # status, queued, attached (issue 17)
    result: dict[str, Any] = {
        "sessions": [
            {
                "sessionId": r.id,
                "cwd": r.cwd,
                **({"title": r.title} if r.title else {}),
                "updatedAt": r.updated_at.isoformat(),
                "_meta": {"agentd": {**meta.get(r.id, {}), **live[r.id]}},
            }
            for r in rows[:page]
        ]
    }
    if len(rows) > page:
        last = rows[page - 1]
        result["nextCursor"] = _encode_cursor(last.updated_at, last.id)
    return result
