"""Fan-out of one session's events to its attached clients (R-E4).

A `Subscriber` renders events into frames and puts them on its connection's bounded
outgoing queue without ever awaiting, so a slow client cannot slow the actor or the
other clients. While a subscriber is catching up from the store it buffers live events
and then goes live without gap or duplicate.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from server.session.events import Event, EventKind
from server.session.render import Frame, acp_replay_frames, for_client, live_frames

_CHUNKS = {EventKind.AGENT_MESSAGE_CHUNK, EventKind.AGENT_THOUGHT_CHUNK}
_FINALS = {EventKind.AGENT_MESSAGE, EventKind.AGENT_THOUGHT}

log = logging.getLogger(__name__)


class FrameSink(Protocol):
    """The outgoing side of a client connection."""

    id: str

    def send_notification(self, method: str, params: dict[str, Any]) -> bool:
        """Queue a notification; False when the client's buffer is full."""
        ...


class Subscriber:
    def __init__(self, sink: FrameSink) -> None:
        self.sink = sink
        self._buffer: list[Event] | None = []  # None once live
        self.last_seq = 0
        self.attached_seq = 0  # the session's last seq when it subscribed (set by the actor)
        # Messages whose first chunks this client missed (it attached mid-stream): their
        # chunks are held back and the whole text is sent once the message is final.
        self._missed: set[str] = set()
        self._started: set[str] = set()
        self.dropped = False

    def deliver(self, event: Event) -> None:
        if self.dropped:
            return
        if self._buffer is not None:
            self._buffer.append(event)
            return
        self._send(event)

    def go_live(self, replayed_up_to: int) -> None:
        """Called after the replay from the store covered every seq <= `replayed_up_to`."""
        buffered, self._buffer = self._buffer or [], None
        self.last_seq = replayed_up_to
        # Transient deltas buffered before a durable event the replay already covered
        # belong to a message whose full text was replayed: drop them with it.
        cut = 0
        for i, ev in enumerate(buffered):
            if ev.seq is not None and ev.seq <= replayed_up_to:
                cut = i + 1
        for ev in buffered[cut:]:
            self._send(ev)

    def _send(self, event: Event) -> None:
        if event.seq is not None:
            if event.seq <= self.last_seq:
                return
            self.last_seq = event.seq
        if event.origin is not None and event.origin == self.sink.id and event.kind is EventKind.USER_MESSAGE:
            return  # the sender already has its own prompt
        frames = live_frames(event, self.last_seq)
        if event.kind in _CHUNKS:
            mid = event.payload["messageId"]
            if mid not in self._started:
                self._started.add(mid)
                if event.payload.get("offset", 0) > 0:
                    self._missed.add(mid)
            if mid in self._missed:
                return
        elif event.kind in _FINALS:
            mid = event.payload["messageId"]
            self._started.discard(mid)
            if mid in self._missed:
                self._missed.discard(mid)
                frames = acp_replay_frames(event) + frames
        supports = getattr(self.sink, "supports_update", None)
        if supports is not None:
            frames = for_client(frames, event, supports, self.last_seq)
        for method, params in frames:
            if not self.sink.send_notification(method, params):
                self.dropped = True
                log.warning("client %s fell behind; dropping its subscription", self.sink.id)
                return


class EventHub:
    def __init__(self) -> None:
        self._subscribers: dict[str, Subscriber] = {}

    def subscribe(self, sink: FrameSink) -> Subscriber:
        sub = Subscriber(sink)
        self._subscribers[sink.id] = sub
        return sub

    def unsubscribe(self, sink_id: str) -> None:
        self._subscribers.pop(sink_id, None)

    def publish(self, event: Event) -> None:
        for sid, sub in list(self._subscribers.items()):
            sub.deliver(event)
            if sub.dropped:
                self._subscribers.pop(sid, None)

    @property
    def sinks(self) -> list[FrameSink]:
        return [s.sink for s in self._subscribers.values()]

    def __len__(self) -> int:
        return len(self._subscribers)


def frames_for(event: Event) -> list[Frame]:  # re-export for tests
    return live_frames(event, event.seq or 0)
