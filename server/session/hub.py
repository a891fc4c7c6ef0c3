"""Fan-out of one session's events to its attached clients (R-E4).

A `Subscriber` renders events into frames and puts them on its connection's bounded
outgoing queue without ever awaiting, so a slow client cannot slow the actor or the
other clients. While a subscriber is catching up from the store it buffers live events
and then goes live without gap or duplicate.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from server.session.events import Event, EventKind
from server.session.render import Frame, acp_replay_frames, for_client, live_frames

_CHUNKS = {EventKind.AGENT_MESSAGE_CHUNK, EventKind.AGENT_THOUGHT_CHUNK}
RESYNC_REQUIRED = "_agentd/resync_required"
_FINALS = {EventKind.AGENT_MESSAGE, EventKind.AGENT_THOUGHT}

log = logging.getLogger(__name__)


class FrameSink(Protocol):
    """The outgoing side of a client connection."""

    id: str

    def send_notification(self, method: str, params: dict[str, Any]) -> bool:
        """Queue a notification; False when the client's buffer is full."""
        ...


class Subscriber:
    def __init__(self, sink: FrameSink, session_id: str = "") -> None:
        self.sink = sink
        self.session_id = session_id
        self._buffer: list[Event] | None = []  # None once live
        self.last_seq = 0
        self.attached_seq = 0  # the session's last seq when it subscribed (set by the actor)
        # Per streaming message, how many characters this client has already received.
        # A message whose start the client missed (it attached mid-stream) is held back
        # and its whole text sent once the message is final.
        self._delivered: dict[str, int] = {}
        self._missed: set[str] = set()
        self.dropped = False
        # Filled by the actor when it subscribes (the state at that instant).
        self.snapshot: dict[str, Any] = {}
        self.partials: list[tuple[EventKind, str, str]] = []

    def deliver(self, event: Event) -> None:
        if self.dropped:
            return
        if self._buffer is not None:
            self._buffer.append(event)
            return
        self._send(event)

    def seed_partial(self, kind: EventKind, message_id: str, text: str) -> None:
        """Send the text streamed so far of an in-flight message (attach, R-E3); later
        chunks continue from there without repeating it."""
        if not text:
            return
        chunk = Event(self.session_id, kind, {"messageId": message_id, "text": text, "offset": 0})
        self._delivered[message_id] = 0
        self._send_chunk(chunk, message_id)

    def go_live(self, replayed_up_to: int, finished: set[str] | None = None) -> None:
        """Called after the replay from the store covered every seq <= `replayed_up_to`;
        sends the text of messages still streaming (unless the replay already carried
        their final text: `finished`), then what was buffered meanwhile."""
        buffered, self._buffer = self._buffer or [], None
        self.last_seq = replayed_up_to
        for kind, message_id, text in self.partials:
            if message_id not in (finished or set()):
                self.seed_partial(kind, message_id, text)
        # Transient deltas buffered before a durable event the replay already covered
        # belong to a message whose full text was replayed: drop them with it.
        cut = 0
        for i, ev in enumerate(buffered):
            if ev.seq is not None and ev.seq <= replayed_up_to:
                cut = i + 1
        for ev in buffered[cut:]:
            self._send(ev)

    def _send(self, event: Event) -> None:
        delivered = self.last_seq  # the cursor a resync must name if this event does not fit
        if event.seq is not None:
            if event.seq <= self.last_seq:
                return
            self.last_seq = event.seq
        if event.origin is not None and event.origin == self.sink.id and event.kind is EventKind.USER_MESSAGE:
            return  # the sender already has its own prompt
        if event.kind in _CHUNKS:
            self._send_chunk(event, event.payload["messageId"])
            return
        frames = live_frames(event, self.last_seq)
        if event.kind in _FINALS:
            mid = event.payload["messageId"]
            seen = self._delivered.pop(mid, None) is not None
            if mid in self._missed or not seen:
                # The client has none (or not the start) of this text — a message that
                # ended without streaming to it (e.g. recovered after a crash): send it whole.
                self._missed.discard(mid)
                frames = acp_replay_frames(event) + frames
        self._emit(event, frames, delivered)

    def _send_chunk(self, event: Event, mid: str) -> None:
        offset = int(event.payload.get("offset", 0))
        text = event.payload["text"]
        if mid in self._missed:
            return
        if mid not in self._delivered:
            if offset > 0:
                self._missed.add(mid)  # the start went by before we attached
                return
            self._delivered[mid] = 0
        already = self._delivered[mid] - offset
        if already >= len(text):
            return  # a client seeded with the partial text has this part
        if already > 0:
            event = Event(
                event.session_id,
                event.kind,
                {**event.payload, "text": text[already:], "offset": offset + already},
            )
        self._delivered[mid] = offset + len(text)
        self._emit(event, live_frames(event, self.last_seq), self.last_seq)

    def _emit(self, event: Event, frames: list[Frame], delivered: int) -> None:
        supports = getattr(self.sink, "supports_update", None)
        if supports is not None:
            frames = for_client(frames, event, supports, self.last_seq)
        for method, params in frames:
            if not self.sink.send_notification(method, params):
                self.dropped = True
                log.warning("client %s fell behind; it is told to resync", self.sink.id)
                resync = getattr(self.sink, "send_urgent", None)
                if resync is not None:
                    # `delivered`: the last durable event this client really got.
                    resync(
                        RESYNC_REQUIRED,
                        {"sessionId": self.session_id, "lastSeq": delivered, "reason": "client_too_slow"},
                    )
                return


class EventHub:
    def __init__(self, on_drop: Callable[[], None] | None = None) -> None:
        self._subscribers: dict[str, Subscriber] = {}
        self._on_drop = on_drop  # a client fell behind and was told to resync

    def subscribe(self, sink: FrameSink, session_id: str = "") -> Subscriber:
        sub = Subscriber(sink, session_id)
        self._subscribers[sink.id] = sub
        return sub

    def unsubscribe(self, sink_id: str) -> None:
        self._subscribers.pop(sink_id, None)

    def publish(self, event: Event) -> None:
        for sid, sub in list(self._subscribers.items()):
            sub.deliver(event)
            if sub.dropped:
                self._subscribers.pop(sid, None)
                if self._on_drop is not None:
                    self._on_drop()

    def resync_all(self, reason: str) -> None:
        """End every subscription, telling each client to resync from the last durable
        event it got (the session's live stream ends here, e.g. its actor failed)."""
        for sub in self._subscribers.values():
            resync = getattr(sub.sink, "send_urgent", None)
            if resync is not None:
                params = {"sessionId": sub.session_id, "lastSeq": sub.last_seq, "reason": reason}
                resync(RESYNC_REQUIRED, params)
        self._subscribers.clear()

    @property
    def sinks(self) -> list[FrameSink]:
        return [s.sink for s in self._subscribers.values()]

    def __len__(self) -> int:
        return len(self._subscribers)


def frames_for(event: Event) -> list[Frame]:  # re-export for tests
    return live_frames(event, event.seq or 0)
