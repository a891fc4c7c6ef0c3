"""`_agentd/session/share` (R-X2): the owner opens its session to one of its own teams, or
closes it again; and what `session/list` says about sharing."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from agentd.infra import AuthMode
from agentd.protocol import RpcError, ShareParams
from agentd.session import ResyncReason, requesting
from agentd.store import SessionSummary
from agentd.transport.handlers.common import session_for
from agentd.transport.handlers.ended import end_deleted, end_watch
from agentd.transport.sharing import Access, access_of, holder
from agentd.transport.state import CallContext

if TYPE_CHECKING:
    from agentd.session import EventHub
    from agentd.transport.state import AppState


async def session_share(ctx: CallContext, params: ShareParams) -> dict[str, Any]:
    actor = await session_for(ctx, params.session_id, Access.OWNER)
    # Any share may be closed; one may be opened only to a team the owner's token is in.
    if params.access != "none" and params.team not in ctx.teams:
        mine = ", ".join(sorted(ctx.teams)) or "none: create the token with --team"
        msg = f"you can share only with a team your token is in ({mine})"
        raise RpcError.invalid_params(f"Invalid params: team: {msg}", [{"path": "team", "message": msg}])
    access = None if params.access == "none" else params.access
    if not await ctx.state.store.set_session_share(actor.id, params.team, access):
        raise RpcError.not_found(f"session {params.session_id}")  # deleted meanwhile
    shares = (await ctx.state.store.session_shares([actor.id])).get(actor.id, {})
    await end_lost_access(ctx.state, actor.hub, actor.id, actor.owner, shares)
    return {"sessionId": actor.id, "shares": share_list(shares)}


async def end_lost_access(
    state: AppState, hub: EventHub, session_id: str, owner: str, shares: dict[str, str]
) -> None:
    """Members attached to the session (to `hub`: its actor's, or this replica's watch of a
    session another replica runs) who lost (some of) their access are detached now, told
    `_agentd/resync_required` (`reason: access_changed`): re-attaching gets them what they
    may still see — a watcher's view, or "not found"."""
    for sink in list(hub.sinks):
        held = holder(sink)
        if held is None or held[0] == owner:
            continue
        now = access_of(held[0], held[1], owner, shares)
        # A watcher may keep a view that asks nothing (a WatchSink, an SSE stream).
        if now is Access.NONE or (now is Access.WATCH and requesting(sink) is not None):
            await end_watch(state, hub, sink, session_id, ResyncReason.ACCESS_CHANGED)


async def recheck_remote_access(state: AppState, session_ids: Collection[str]) -> None:
    """The sessions' shares changed, or they were deleted (a NOTIFY from whichever replica
    did it; or the listener reconnected: every watched session at once, in two reads): the
    members watching them from this replica are held to the store as the owner holds its
    own clients — all of them detached from a session that is gone."""
    remote = state.remote
    watches = {}
    for session_id in session_ids:
        watch = remote.get(session_id) if remote is not None else None
        if watch is not None and len(watch.hub):
            watches[session_id] = watch
    if not watches:
        return
    owners = await state.store.session_owners(list(watches))
    shared = await state.store.session_shares([sid for sid in watches if sid in owners])
    for session_id, watch in watches.items():
        owner = owners.get(session_id)
        if owner is None:
            await end_deleted(state, watch.hub, session_id)
        else:
            await end_lost_access(state, watch.hub, session_id, owner, shared.get(session_id, {}))


def share_list(shares: dict[str, str]) -> list[dict[str, str]]:
    return [{"team": team, "access": shares[team]} for team in sorted(shares)]


async def listing_meta(ctx: CallContext, rows: list[SessionSummary]) -> dict[str, dict[str, Any]]:
    """`_meta.agentd` of each listed session: its owner and the caller's access; the owner
    also sees whom it shared the session with. One query for the page."""
    # Without auth no token names a team, so nothing can be shared: no query.
    ids = [r.id for r in rows] if ctx.state.settings.auth is not AuthMode.NONE else []
    shares = await ctx.state.store.session_shares(ids) if ids else {}
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        of = shares.get(r.id, {})
        access = access_of(ctx.principal, ctx.teams, r.owner, of)
        meta: dict[str, Any] = {"owner": r.owner, "access": access.value}
        if access is Access.OWNER:
            meta["shares"] = share_list(of)
        out[r.id] = meta
    return out
