"""Fan-out of one session's events to its attached clients (R-E4).

A `Subscriber` renders events into frames (with the injected `Renderer`: the wire shape
lives in agentd/transport/render.py) and puts them on its connection's bounded
outgoing queue without ever awaiting, so a slow client cannot slow the actor or the
other clients. While a subscriber is catching up from the store (agentd/session/eventlog/replayer.py)
it buffers live events — at most `buffer_limit`; past that the buffer is discarded and
the replay reads the store further — and then goes live without gap or duplicate.

A published event is rendered and encoded once for all the live subscribers that get the
same frames (`Shared`): each client's connection queues the same text (`EncodedSink`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from agentd.core import AgentTextChunk, Event, EventKind
from agentd.session.errors import ResyncReason
from agentd.session.sinks import Frame, FrameSink, Renderer, encoded, filtering, urgent

_CHUNKS = {EventKind.AGENT_MESSAGE_CHUNK, EventKind.AGENT_THOUGHT_CHUNK}
DEFAULT_BUFFER_LIMIT = 10_000  # events; the server sets it to `client_buffer_frames`
_FINALS = {EventKind.AGENT_MESSAGE, EventKind.AGENT_THOUGHT}

log = logging.getLogger(__name__)


class Shared:
    """One published event's frames, rendered for a client at `last_seq`, and their encoded
    text: made by the first subscriber that needs them and reused by every other one that
    gets the very same frames (the same event and cursor, no per-client change)."""

    __slots__ = ("event", "frames", "last_seq", "texts")

    def __init__(self, event: Event) -> None:
        self.event = event
        self.last_seq = -1
        self.frames: list[Frame] = []
        self.texts: list[str | None] = []

    def live(self, renderer: Renderer, last_seq: int) -> list[Frame]:
        if last_seq != self.last_seq:  # all live clients normally share one cursor
            self.frames = renderer.live(self.event, last_seq)
            self.texts = [None] * len(self.frames)
            self.last_seq = last_seq
        return self.frames

    def text(self, renderer: Renderer, frame: Frame) -> str | None:
        """The encoded text of `frame` if it is one of the shared frames (by identity:
        a client-specific frame is never mistaken for a shared one), else None."""
        for i, (_, params) in enumerate(self.frames):
            if params is frame[1]:
                text = self.texts[i]
                if text is None:
                    text = self.texts[i] = renderer.encode(self.frames[i])
                return text
        return None


class Subscriber:
    def __init__(self, sink: FrameSink, session_id: str = "", *, render: Renderer) -> None:
        self.sink = sink
        self.session_id = session_id
        self.renderer = render  # the wire shape (agentd/transport/render.py)
        self._encoded = encoded(sink)  # takes frames encoded once for all clients
        self._filtering = filtering(sink)  # once: a Protocol isinstance costs µs per frame
        self._shared: Shared | None = None  # the publish being delivered (`_send`)
        self._buffer: list[Event] | None = []  # None once live
        self.last_seq = 0
        self.attached_seq = 0  # the session's last seq when it subscribed (set by the actor)
        # Per streaming message, how many characters this client has already received.
        # A message whose start the client missed (it attached mid-stream) is held back
        # and its whole text sent once the message is final.
        self._delivered: dict[str, int] = {}
        self._missed: set[str] = set()
        self.dropped = False
        self.detached = False  # unsubscribed or replaced by a newer attach: a replay stops
        # Live events held while replaying; past this many they are discarded (durable
        # ones are in the store, which the replay then reads further) so memory stays bounded.
        self.buffer_limit = DEFAULT_BUFFER_LIMIT
        self._overflowed = False
        # Filled by the actor when it subscribes (the state at that instant).
        self.snapshot: dict[str, Any] = {}
        self.partials: list[tuple[EventKind, str, str]] = []

    def deliver(self, event: Event, shared: Shared | None = None) -> None:
        if self.dropped:
            return
        if self._buffer is not None:
            if len(self._buffer) >= self.buffer_limit:
                self._buffer.clear()
                self._overflowed = True
            self._buffer.append(event)
            return
        self._send(event, shared)

    @property
    def replaying(self) -> bool:
        return self._buffer is not None

    @property
    def buffered(self) -> int:
        return len(self._buffer or [])

    def take_buffered(self, replayed_up_to: int) -> list[Event] | None:
        """For the replay's catch-up: what was buffered since the last call, minus what
        the store replay (every seq <= `replayed_up_to`) already covered; None when the
        buffer overflowed and was discarded (read the store further, then call again).
        Stays in buffering mode until `go_live`."""
        assert self._buffer is not None
        buffered, self._buffer = self._buffer, []
        if self._overflowed:
            self._overflowed = False
            # The text streamed so far is stale now; chunks that continue a message whose
            # start this client missed are held back until its final text (see _render_chunk).
            self.partials = []
            return None
        self.last_seq = max(self.last_seq, replayed_up_to)
        return buffered[_covered(buffered, replayed_up_to) :]

    def partial_frames(self, finished: set[str]) -> list[Frame]:
        """The text streamed so far of messages still in flight whose final text the
        replay did not carry (`finished`), as chunk frames (sent once, before the buffer)."""
        frames: list[Frame] = []
        for kind, message_id, text in self.partials:
            if message_id not in finished:
                frames += self._seed_frames(kind, message_id, text)
        return frames

    def render(self, event: Event) -> list[Frame]:
        """The frames of one buffered event, as the live path would send them."""
        return self._render(event)[0]

    def seed_partial(self, kind: EventKind, message_id: str, text: str) -> None:
        """Send the text streamed so far of an in-flight message (attach, R-E3); later
        chunks continue from there without repeating it."""
        self._emit(self._seed_frames(kind, message_id, text), self.last_seq)

    def _seed_frames(self, kind: EventKind, message_id: str, text: str) -> list[Frame]:
        if not text:
            return []
        thought = kind is EventKind.AGENT_THOUGHT_CHUNK
        chunk = Event(self.session_id, AgentTextChunk(message_id, text, 0, thought=thought))
        self._delivered[message_id] = 0
        return self._render_chunk(chunk, message_id)

    def go_live(self, replayed_up_to: int | None = None, finished: set[str] | None = None) -> None:
        """Called after the replay from the store covered every seq <= `replayed_up_to`;
        sends the text of messages still streaming (unless the replay already carried
        their final text: `finished`), then what was buffered meanwhile. The paced
        replay drains the buffer itself (`take_buffered`) and calls this with no seq."""
        if replayed_up_to is None:
            assert not self._buffer, "go_live with events still buffered"
            self._buffer = None
            return
        buffered, self._buffer = self._buffer or [], None
        self.last_seq = replayed_up_to
        for kind, message_id, text in self.partials:
            if message_id not in (finished or set()):
                self.seed_partial(kind, message_id, text)
        for ev in buffered[_covered(buffered, replayed_up_to) :]:
            self._send(ev)

    def _send(self, event: Event, shared: Shared | None = None) -> None:
        self._shared = shared if shared is not None and shared.event is event else None
        try:
            self._emit(*self._render(event))
        finally:
            self._shared = None

    def _live(self, event: Event) -> list[Frame]:
        if self._shared is not None and event is self._shared.event:
            return self._shared.live(self.renderer, self.last_seq)
        return self.renderer.live(event, self.last_seq)

    def _render(self, event: Event) -> tuple[list[Frame], int]:
        """The frames for `event` (updating what this client has been sent), and the
        cursor a resync must name if they do not fit."""
        delivered = self.last_seq
        if event.seq is not None:
            if event.seq <= self.last_seq:
                return [], delivered
            self.last_seq = event.seq
        if event.origin is not None and event.origin == self.sink.id and event.kind is EventKind.USER_MESSAGE:
            return [], delivered  # the sender already has its own prompt
        if event.kind in _CHUNKS:
            return self._render_chunk(event, event.payload["messageId"]), self.last_seq
        frames = self._live(event)
        if event.kind in _FINALS:
            mid = event.payload["messageId"]
            seen = self._delivered.pop(mid, None) is not None
            if mid in self._missed or not seen:
                # The client has none (or not the start) of this text — a message that
                # ended without streaming to it (recovered after a crash, or watched from
                # another replica): its whole text first, transient, then the event's own
                # frames as every client gets them — one form per seq.
                self._missed.discard(mid)
                frames = self.renderer.missed(event, delivered) + frames
        return self._for_client(event, frames), delivered

    def _render_chunk(self, event: Event, mid: str) -> list[Frame]:
        offset = int(event.payload.get("offset", 0))
        text = event.payload["text"]
        if mid in self._missed:
            return []
        if mid not in self._delivered:
            if offset > 0:
                self._missed.add(mid)  # the start went by before we attached
                return []
            self._delivered[mid] = 0
        if offset > self._delivered[mid]:
            # Chunks in between were discarded (a replay's buffer overflowed): hold the
            # rest back; the final event then brings the whole text.
            self._missed.add(mid)
            return []
        already = self._delivered[mid] - offset
        if already >= len(text):
            return []  # a client seeded with the partial text has this part
        if already > 0 and isinstance(event.update, AgentTextChunk):
            rest = dataclasses.replace(event.update, text=text[already:], offset=offset + already)
            event = Event(event.session_id, rest)
        self._delivered[mid] = offset + len(text)
        return self._for_client(event, self._live(event))

    def _for_client(self, event: Event, frames: list[Frame]) -> list[Frame]:
        client = self._filtering
        if client is not None:
            frames = self.renderer.for_client(frames, event, client.supports_update, self.last_seq)
        return frames

    def _emit(self, frames: list[Frame], delivered: int) -> None:
        for method, params in frames:
            text = None
            if self._shared is not None and self._encoded is not None:
                text = self._shared.text(self.renderer, (method, params))
            if text is None:
                sent = self.sink.send_notification(method, params)
            else:
                assert self._encoded is not None
                sent = self._encoded.send_encoded(text)
            if not sent:
                self.dropped = True
                log.warning("client %s fell behind; it is told to resync", self.sink.id)
                resync = urgent(self.sink)
                if resync is not None:
                    # `delivered`: the last durable event this client really got.
                    slow = ResyncReason.CLIENT_TOO_SLOW
                    resync.send_urgent(*self.renderer.resync(self.session_id, delivered, slow))
                return


class EventHub:
    def __init__(self, *, render: Renderer, on_drop: Callable[[], None] | None = None) -> None:
        self._render = render
        self._subscribers: dict[str, Subscriber] = {}
        self._on_drop = on_drop  # a client fell behind and was told to resync

    def subscribe(self, sink: FrameSink, session_id: str = "") -> Subscriber:
        sub = Subscriber(sink, session_id, render=self._render)
        self.unsubscribe(sink.id)  # a re-attach replaces the connection's subscription
        self._subscribers[sink.id] = sub
        return sub

    def unsubscribe(self, sink_id: str) -> None:
        sub = self._subscribers.pop(sink_id, None)
        if sub is not None:
            sub.detached = True

    def get(self, sink_id: str) -> Subscriber | None:
        return self._subscribers.get(sink_id)

    def publish(self, event: Event) -> None:
        shared = Shared(event)  # rendered and encoded once for every client that gets the same
        for sid, sub in list(self._subscribers.items()):
            sub.deliver(event, shared)
            if sub.dropped:
                self._subscribers.pop(sid, None)
                if self._on_drop is not None:
                    self._on_drop()

    def resync_all(self, reason: ResyncReason) -> None:
        """End every subscription, telling each client to resync from the last durable
        event it got (the session's live stream ends here, e.g. its actor failed)."""
        for sub in self._subscribers.values():
            resync = urgent(sub.sink)
            if resync is not None:
                resync.send_urgent(*self._render.resync(sub.session_id, sub.last_seq, reason))
        self._subscribers.clear()

    @property
    def sinks(self) -> list[FrameSink]:
        return [s.sink for s in self._subscribers.values()]

    def __len__(self) -> int:
        return len(self._subscribers)


def _covered(buffered: list[Event], replayed_up_to: int) -> int:
    """How many buffered events the store replay covered: up to the last durable one with
    seq <= `replayed_up_to`. Transient deltas before it belong to a message whose full
    text was replayed: they go with it."""
    cut = 0
    for i, ev in enumerate(buffered):
        if ev.seq is not None and ev.seq <= replayed_up_to:
            cut = i + 1
    return cut
