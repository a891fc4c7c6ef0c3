"""Shared by the method handlers: the caller's session (or "not found"), cwd checks against
the workspace policy, attaching a connection, `_meta.agentd`, modes and config options."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentd.infra import AuthMode
from agentd.protocol import RpcError
from agentd.session import MODES, FrameSink
from agentd.transport.sharing import Access, WatchSink, access_of, denied
from agentd.transport.state import CallContext
from agentd.transport.workspace_policy import check_contained, default_workspace

if TYPE_CHECKING:
    from agentd.session import SessionActor


def modes_state(actor: SessionActor) -> dict[str, Any]:
    return {"currentModeId": actor.mode().value, "availableModes": MODES}


async def session_for(ctx: CallContext, session_id: str, needs: Access = Access.OWNER) -> SessionActor:
    """The caller's session, or one shared with its team at `needs` or more (R-X2)."""
    actor = await ctx.state.manager.get(session_id)
    if actor is None:
        raise RpcError.not_found(f"session {session_id}")
    if actor.owner != ctx.principal:  # (the owner's own needs no more: `owner_access`'s first rule)
        await owner_access(ctx, session_id, actor.owner, needs)
    return actor


async def session_access(
    ctx: CallContext, session_id: str, needs: Access = Access.OWNER
) -> tuple[SessionActor, Access]:
    """The session and the caller's access to it, at least `needs`; a session the caller
    may not see at all looks exactly like a missing one (R-X2)."""
    actor = await ctx.state.manager.get(session_id)
    if actor is None:
        raise RpcError.not_found(f"session {session_id}")
    return actor, await owner_access(ctx, session_id, actor.owner, needs)


async def owner_access(ctx: CallContext, session_id: str, owner: str, needs: Access) -> Access:
    """The caller's access to a session owned by `owner`, at least `needs` (R-X2): the
    owner's own, else its team's share; none looks exactly like a missing session. One rule
    for a session run here and one read from the store (another replica runs it)."""
    if owner == ctx.principal:
        return Access.OWNER
    access = Access.NONE
    if ctx.teams:
        shares = (await ctx.state.store.session_shares([session_id])).get(session_id, {})
        access = access_of(ctx.principal, ctx.teams, owner, shares)
    if access is Access.NONE:
        raise RpcError.not_found(f"session {session_id}")
    if access.rank < needs.rank:
        raise denied(session_id, access, needs)
    return access


def subscriber(ctx: CallContext, access: Access) -> FrameSink:
    """What the connection subscribes as: a watcher is never asked anything."""
    conn = ctx.connection
    assert conn is not None
    return WatchSink(conn) if access is Access.WATCH else conn


async def check_cwd(ctx: CallContext, cwd: str) -> str:
    return await asyncio.to_thread(_check_cwd_sync, ctx, cwd)


def _check_cwd_sync(ctx: CallContext, cwd: str) -> str:
    if not cwd:  # the caller's default workspace, made on first use; still confined below
        default = default_workspace(ctx.state.settings, ctx.principal)
        if default is None:
            msg = "name a folder: your principal has no default workspace"
            raise RpcError.invalid_params(f"Invalid params: cwd: {msg}", [{"path": "cwd", "message": msg}])
        default.mkdir(mode=0o700, parents=True, exist_ok=True)
        cwd = str(default)
    resolved = check_contained(ctx.state.settings, ctx.principal, cwd)  # per principal with auth
    if not resolved.is_dir():
        msg = f"{cwd} is not an existing directory"
        raise RpcError.invalid_params(f"Invalid params: cwd: {msg}", [{"path": "cwd", "message": msg}])
    return str(resolved)


async def check_loaded_cwd(ctx: CallContext, actor: SessionActor, cwd: str | Path) -> None:
    """With auth, neither the session's own cwd (a grant may have been withdrawn since)
    nor the one asked for may lie outside the principal's roots. A session shared with the
    caller's team works where its owner may: its cwd is checked against the owner's roots,
    and the caller's `cwd` is not used."""
    if ctx.state.settings.auth is not AuthMode.NONE:
        if actor.owner != ctx.principal:
            await asyncio.to_thread(check_contained, ctx.state.settings, actor.owner, actor.cwd)
            return
        for path in (actor.cwd, cwd):
            await asyncio.to_thread(check_contained, ctx.state.settings, ctx.principal, path)


async def attach_with_replay(
    ctx: CallContext, actor: SessionActor, *, replay: bool, access: Access = Access.OWNER
) -> None:
    """Subscribe this connection; replay history first if asked, with no gap or duplicate."""
    await ctx.state.attach(actor, subscriber(ctx, access), replay="acp" if replay else "none")


def agentd_meta(meta: Any) -> dict[str, Any]:
    inner = meta.get("agentd") if isinstance(meta, dict) else None
    return inner if isinstance(inner, dict) else {}


def config_options(ctx: CallContext, actor: SessionActor) -> list[dict[str, Any]]:
    """Mode, model and agent as ACP config options (ACP v1 has no set_model)."""
    return actor.config_options()


def known_agent(ctx: CallContext, name: Any, path: str) -> str:
    if not isinstance(name, str) or name not in ctx.state.agents:
        known = ", ".join(sorted(ctx.state.agents))
        msg = f"unknown agent {name!r} (one of {known})"
        raise RpcError.invalid_params(f"Invalid params: {path}: {msg}", [{"path": path, "message": msg}])
    return name
