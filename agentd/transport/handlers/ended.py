"""Clients whose stream of a session ends for good on this replica — a member who lost
access (R-X2), anyone watching a deleted session, or the other clients of a session one
client closed — are told `_agentd/resync_required`
with the reason, and detached. The same code serves the clients of the session's actor and
this replica's watch of a session another replica runs (agentd/session/replicas/remote.py), so a
client hears the same wherever it is attached."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd.session import FrameSink, ResyncReason, tracked_sessions, urgent
from agentd.transport.render import ACP_RENDERER

if TYPE_CHECKING:
    from agentd.session import EventHub
    from agentd.transport.state import AppState


async def end_watch(
    state: AppState, hub: EventHub, sink: FrameSink, session_id: str, reason: ResyncReason
) -> None:
    """Tell `sink` why its stream ends, then detach it from the session."""
    sub = hub.get(sink.id)
    frame = ACP_RENDERER.resync(session_id, sub.last_seq if sub else 0, reason)
    # In order after what the client was sent (on SSE the resync then ends the stream);
    # ahead of it only when its buffer is full.
    if not sink.send_notification(*frame):
        tell = urgent(sink)
        if tell is not None:
            tell.send_urgent(*frame)
    tracked = tracked_sessions(sink)
    if tracked is not None:
        tracked.discard(session_id)
    await state.detach(session_id, sink.id)


async def end_deleted(state: AppState, hub: EventHub, session_id: str, *, caller: str | None = None) -> None:
    """The session's delete has committed: every client attached to `hub` but the deleting
    `caller` (its answer says so) is told `session_deleted` and detached — re-attaching
    answers "not found", as for a session that never was."""
    await end_all(state, hub, session_id, ResyncReason.SESSION_DELETED, caller=caller)


async def end_closed(state: AppState, hub: EventHub, session_id: str, *, caller: str | None = None) -> None:
    """A client closed the session (`session/close`: ACP's close is of the session, not of
    one client's view — it cancels the session's work and frees its resources), so its
    actor has stopped: every other client attached to `hub` is told `session_closed` and
    detached rather than left following an actor that sends nothing more. Re-attaching
    reloads the session from the store."""
    await end_all(state, hub, session_id, ResyncReason.SESSION_CLOSED, caller=caller)


async def end_all(
    state: AppState, hub: EventHub, session_id: str, reason: ResyncReason, *, caller: str | None
) -> None:
    for sink in list(hub.sinks):
        if sink.id != caller:
            await end_watch(state, hub, sink, session_id, reason)
        hub.unsubscribe(sink.id)  # an ended actor's hub: nothing else lets go of it
