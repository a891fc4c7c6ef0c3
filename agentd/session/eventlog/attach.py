"""Attaching a client to a session (R-E3): subscribe, replay what it missed from the store,
then go live with no gap and no duplicate. Called by the transports through the
composition root (`AppState.attach`)."""

from __future__ import annotations

import asyncio
from enum import StrEnum
from typing import TYPE_CHECKING

from agentd.session.commands import Attach, AttachComplete, Detach
from agentd.session.errors import SessionError, SessionErrorKind
from agentd.session.eventlog.hub import Subscriber
from agentd.session.eventlog.replayer import ReplayAborted, ReplayMode
from agentd.session.eventlog.replayer import replay as replay_log
from agentd.session.sinks import FrameSink, tracked_sessions
from agentd.store import Store

if TYPE_CHECKING:
    from agentd.session.actor import SessionActor


class Replay(StrEnum):
    NONE = "none"  # from now on
    ACP = "acp"  # `session/load`: the whole history in ACP form
    ATTACH = "attach"  # a snapshot, then every durable event after a cursor


def check_cursor(actor: SessionActor, after_seq: int) -> None:
    """An attach cursor beyond the log cannot be served (`resync_required`). Checked
    before any subscription is touched, so a failed attach changes nothing; seqs only
    grow, so a cursor valid now stays valid."""
    last = actor.last_seq
    if not 0 <= after_seq <= last:
        raise SessionError(
            SessionErrorKind.RESYNC_REQUIRED,
            f"resync_required: cursor {after_seq} cannot be served (the session is at {last})",
            {"reason": "resync_required", "lastSeq": last},
        )


async def attach(
    store: Store,
    actor: SessionActor,
    sink: FrameSink,
    *,
    replay: Replay | str = Replay.NONE,
    after_seq: int = 0,
    buffer_limit: int,
) -> Subscriber:
    """Subscribe `sink` to the session. `replay`: "none" (from now on), "acp" (the whole
    history in ACP form), or "attach" (a snapshot, then every durable event after
    `after_seq`). Then the text of a message still streaming, then live traffic. The
    replay is paced by the client and streams from the store (replay.py); it returns once
    it is done, so the caller's response follows it."""
    mode = Replay(replay)
    if mode is Replay.ATTACH:
        check_cursor(actor, after_seq)
    fut: asyncio.Future[Subscriber] = asyncio.get_running_loop().create_future()
    actor.send(Attach(sink, fut))
    sub = await fut
    sub.buffer_limit = buffer_limit
    sessions = tracked_sessions(sink)
    if sessions is not None:
        sessions.add(actor.id)
    if mode is Replay.NONE:
        sub.go_live(sub.attached_seq)
        actor.send(AttachComplete(sink, send_commands=True))
        return sub
    try:
        await replay_log(
            store,
            sub,
            sink,
            mode=ReplayMode(mode.value),
            after_seq=after_seq if mode is Replay.ATTACH else 0,
        )
    except BaseException as exc:
        if not sub.detached:  # not already replaced by a newer attach of this client
            actor.send(Detach(sink.id))
            if sessions is not None:
                sessions.discard(actor.id)
        if isinstance(exc, ReplayAborted):
            kind = SessionErrorKind.CONNECTION_CLOSED if exc.closed else SessionErrorKind.REPLAY_DETACHED
            raise SessionError(kind, f"replay stopped: {exc}") from None
        raise
    # With a replay the client knows the session: tell it the commands before the
    # response. A brand-new session learns them right after `session/new` answers.
    actor.send_available_commands(sink)
    actor.send(AttachComplete(sink, send_commands=False))
    return sub
