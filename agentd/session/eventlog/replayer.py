"""Replaying a session's log to one attaching client (R-E3), however long it is.

The store is read in pages (keyset by seq) and every frame awaits room on the client
(`FrameSink.send_replay`, a window of its own in the client's outgoing queue), so a
replay is paced by the client's socket: it is not bounded by the live buffer, never
drops a frame and never holds more than a page.
Live events that commit meanwhile wait in the subscriber's bounded catch-up buffer; the
replay drains it the same awaiting way until it is empty and only then goes live, all
in one step, so there is no gap and no duplicate. When the buffer overflows it is
discarded and the replay reads the store further: durable events are all there, only
transient deltas are lost (a final message event carries the whole text).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from agentd.core import Event, EventKind
from agentd.session.eventlog.hub import Subscriber
from agentd.session.sinks import Frame, FrameSink, filtering
from agentd.store import Store

PAGE_SIZE = 500  # events per store read: enough to amortise a query, small enough to hold
_FINALS = (EventKind.AGENT_MESSAGE, EventKind.AGENT_THOUGHT)


class ReplayMode(StrEnum):
    ACP = "acp"  # `session/load`: the history in ACP form
    ATTACH = "attach"  # `_agentd/session/attach`, SSE: the snapshot, then every durable event


class ReplayAborted(Exception):
    """The client went away, or its subscription was replaced or detached, mid-replay."""

    def __init__(self, closed: bool) -> None:
        super().__init__("the connection closed" if closed else "the subscription was detached")
        self.closed = closed


async def replay(
    store: Store,
    sub: Subscriber,
    sink: FrameSink,
    *,
    mode: ReplayMode,
    after_seq: int = 0,
    page_size: int = PAGE_SIZE,
) -> int:
    """Send every durable event after `after_seq`, then what went live meanwhile, then
    switch `sub` to live delivery. Returns the last seq the replay covered; raises
    ReplayAborted."""
    renderer = sub.renderer
    render = renderer.attach if mode is ReplayMode.ATTACH else renderer.whole
    client = filtering(sink)
    supports: Callable[[str], bool] = client.supports_update if client is not None else _every_update
    if mode is ReplayMode.ATTACH:
        await _send(sink, sub, [renderer.snapshot(sub.snapshot)])
    upto = after_seq
    # Messages streaming when it subscribed whose final text the replay carried (their
    # partial text is then not sent); only those are remembered, so memory stays bounded.
    streaming = {message_id for _, message_id, _ in sub.partials}
    finished: set[str] = set()
    seeded = False
    while True:
        upto = max(upto, sub.last_seq)
        while True:  # the store, page by page, up to its end
            page = await store.read_events(sub.session_id, after_seq=upto, limit=page_size)
            for stored in page:
                event = Event.stored(sub.session_id, stored.kind, stored.payload, stored.seq)
                if event.kind in _FINALS and event.payload["messageId"] in streaming:
                    finished.add(event.payload["messageId"])
                await _send(sink, sub, renderer.for_client(render(event), event, supports, stored.seq))
                upto = stored.seq
            if len(page) < page_size:
                break
        while True:  # then what was published meanwhile, until nothing is left
            buffered = sub.take_buffered(upto)
            if buffered is None:
                break  # overflowed and discarded: back to the store
            # First the text streamed so far of messages still in flight (once).
            seeds = [] if seeded else sub.partial_frames(finished)
            seeded = True
            if not buffered and not seeds:
                sub.go_live()  # no await since the buffer was found empty: nothing falls between
                return upto
            await _send(sink, sub, seeds)
            for event in buffered:
                await _send(sink, sub, sub.render(event))


def _every_update(session_update: str) -> bool:
    return True


async def _send(sink: FrameSink, sub: Subscriber, frames: list[Frame]) -> None:
    for method, params in frames:
        if sub.detached:
            raise ReplayAborted(closed=False)
        if not await sink.send_replay(method, params):
            raise ReplayAborted(closed=True)
