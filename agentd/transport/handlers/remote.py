"""Attaching to a session another replica owns (R-C1, issue 15 item 2): `session/load`,
`session/resume` and `_agentd/session/attach` on a non-owner are served here, from the log
(agentd/session/replicas/remote.py) — the caller's access checked against the stored session and
its shares exactly as for a local one (R-X2)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentd.core import SessionModes
from agentd.protocol import RpcError
from agentd.session import (
    MODES,
    ReplayAborted,
    ReplayMode,
    SessionError,
    SessionErrorKind,
    Subscriber,
    session_config_options,
    tracked_sessions,
)
from agentd.store import SessionRecord
from agentd.transport.handlers.common import owner_access, session_access, subscriber
from agentd.transport.sharing import Access
from agentd.transport.state import CallContext

if TYPE_CHECKING:
    from agentd.session import SessionActor


def owner_elsewhere(ctx: CallContext, exc: SessionError) -> str | None:
    """The owning replica when this call may be served from the log here, else None."""
    if exc.kind is not SessionErrorKind.OWNED_ELSEWHERE or ctx.state.remote is None or ctx.routed:
        return None
    owner = (exc.data or {}).get("owner")
    return owner if isinstance(owner, str) else None


async def here_or_owner(
    ctx: CallContext, session_id: str, needs: Access
) -> tuple[SessionActor, Access] | str:
    """The session run here and the caller's access to it, or — when another replica runs
    it and this call may be served from the log here — that replica's id."""
    try:
        return await session_access(ctx, session_id, needs)
    except SessionError as exc:
        owner = owner_elsewhere(ctx, exc)
        if owner is None:
            raise
        return owner


async def stored_access(
    ctx: CallContext, session_id: str, needs: Access = Access.WATCH
) -> tuple[SessionRecord, Access]:
    """`session_access` for a session this replica does not run: from the stored row."""
    record = await ctx.state.store.get_session(session_id)
    if record is None:
        raise RpcError.not_found(f"session {session_id}")
    return record, await owner_access(ctx, session_id, record.owner, needs)


async def attach_remote(
    ctx: CallContext,
    session_id: str,
    owner: str,
    *,
    replay: ReplayMode | None,
    after_seq: int = 0,
    needs: Access = Access.WATCH,
) -> tuple[Subscriber, SessionRecord]:
    remote = ctx.state.remote
    assert remote is not None
    record, access = await stored_access(ctx, session_id, needs)
    if replay is ReplayMode.ATTACH:
        last = await ctx.state.store.last_seq(session_id)
        if not 0 <= after_seq <= last:
            raise SessionError(
                SessionErrorKind.RESYNC_REQUIRED,
                f"resync_required: cursor {after_seq} cannot be served (the session is at {last})",
                {"reason": "resync_required", "lastSeq": last},
            )
    sink = subscriber(ctx, access)
    sessions = tracked_sessions(sink)
    try:
        sub = await remote.attach(
            session_id,
            sink,
            replay=replay,
            after_seq=after_seq,
            buffer_limit=ctx.state.settings.client_buffer_frames,
            owner=owner,
        )
    except ReplayAborted as exc:
        kind = SessionErrorKind.CONNECTION_CLOSED if exc.closed else SessionErrorKind.REPLAY_DETACHED
        raise SessionError(kind, f"replay stopped: {exc}") from None
    if sessions is not None:
        sessions.add(session_id)
    if await ctx.state.store.get_session(session_id) is None:
        # Deleted while this attach ran: its NOTIFY may have gone by before the subscription.
        if sessions is not None:
            sessions.discard(session_id)
        await ctx.state.detach(session_id, sink.id)
        raise RpcError.not_found(f"session {session_id}")
    return sub, record


async def watch_from_here(ctx: CallContext, session_id: str, owner: str) -> None:
    """Subscribe the caller's connection to the session's events from now on (a prompt
    routed to the owner: its turn's events come to this client from the log)."""
    await attach_remote(ctx, session_id, owner, replay=None, needs=Access.DRIVE)


def _answer(ctx: CallContext, record: SessionRecord) -> dict[str, Any]:
    modes = SessionModes.of(record.mode, record.plan)
    options = session_config_options(
        ctx.state.services, modes.mode_id.value, record.model, record.agent, plan=modes.plan
    )
    return {
        "modes": {"currentModeId": modes.mode_id.value, "availableModes": MODES},
        "configOptions": options,
    }


async def load_remote(
    ctx: CallContext, session_id: str, owner: str, *, replay: bool, mcp: bool
) -> dict[str, Any]:
    """`session/load` (`replay`) or `session/resume` of a session owned elsewhere."""
    if mcp:  # the MCP servers would run where the session runs
        raise RpcError.invalid_params(
            f"Invalid params: mcpServers: session {session_id} runs on replica {owner}; "
            "give it MCP servers there",
            {"reason": "owned_elsewhere", "owner": owner},
        )
    _, record = await attach_remote(ctx, session_id, owner, replay=ReplayMode.ACP if replay else None)
    return _answer(ctx, record)
