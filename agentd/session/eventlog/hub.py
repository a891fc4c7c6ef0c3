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

from agentd.core import AgentText, AgentTextChunk, Event, EventKind, Unparsed
from agentd.session.errors import ResyncReason
from agentd.session.sinks import Frame, FrameSink, Gated, Renderer, encoded, filtering, urgent

_CHUNKS = {EventKind.AGENT_MESSAGE_CHUNK, EventKind.AGENT_THOUGHT_CHUNK}
DEFAULT_BUFFER_LIMIT = 10_000  # events; the server sets it to `client_buffer_frames`
_FINALS = {EventKind.AGENT_MESSAGE, EventKind.AGENT_THOUGHT}
# `EventHub.publish` renders a live client's frames itself (`Subscriber._render`'s common
# cases written out: a call less per client and event, ~10 a trivial turn). Off: every
# client through `_render` (tests run both and compare what each client gets).
INLINE_RENDER = True
# Updates `_render` has steps of its own for, by exact type (a set look-up, no `isinstance`
# call per event: none of them has subclasses, tests/unit/session/eventlog/test_hub_inline.py).
_OWN_STEPS = frozenset({AgentText, AgentTextChunk, Unparsed})

log = logging.getLogger(__name__)


class Shared:
    """One published event's frames, rendered for a client at `last_seq`, and their encoded
    text: made by the first subscriber that needs them and reused by every other one that
    gets the very same frames (the same event and cursor, no per-client change). The hub
    keeps one and resets it per publish (`EventHub.publish`); the subscriber reads it
    inline (`Subscriber._live`, `Subscriber._emit`): three calls per client and event less."""

    __slots__ = ("event", "frames", "last_seq", "texts")

    def __init__(self, event: Event | None) -> None:
        self.event = event
        self.last_seq = -1
        self.frames: list[Frame] = []
        # Frame index → its encoded text, made on first use (a dict: no `[None] * len(…)`
        # per publish).
        self.texts: dict[int, bytes] = {}


class Subscriber:
    def __init__(self, sink: FrameSink, session_id: str = "", *, render: Renderer) -> None:
        self.sink = sink
        self.session_id = session_id
        self.renderer = render  # the wire shape (agentd/transport/render.py)
        self._encoded = encoded(sink)  # takes frames encoded once for all clients
        self._filtering = filtering(sink)  # once: a Protocol isinstance costs µs per frame
        # The encoded-frame send, once (a connection's is its queue's own `offer`). A
        # connection that can hold a publish's frames and send them at its end in one write
        # (agentd/transport/connection.py `DIRECT_PUBLISH`) gives its pair: `publish` then
        # flushes every subscriber once it is done.
        self._send = self._encoded.send_encoded if self._encoded is not None else None
        held = getattr(sink, "send_held", None)
        self._flush: Callable[[], None] | None = None
        if held is not None and self._send is not None:
            self._send, self._flush = held, sink.flush_held  # type: ignore[attr-defined]
        # What this client may take, by a `Gated` frame's gate: the connection's own
        # answers (cleared in place when `initialize` changes them), else ours.
        cache = getattr(sink, "supports_cache", None)
        self._allowed: dict[str, bool] = cache if isinstance(cache, dict) else {}
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
        if shared is not None and shared.event is not event:
            shared = None
        frames, delivered = self._render(event, shared)
        if frames:
            self._emit(frames, delivered, shared)

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
        return self._render(event, None)[0]

    def seed_partial(self, kind: EventKind, message_id: str, text: str) -> None:
        """Send the text streamed so far of an in-flight message (attach, R-E3); later
        chunks continue from there without repeating it."""
        self._emit(self._seed_frames(kind, message_id, text), self.last_seq, None)

    def _seed_frames(self, kind: EventKind, message_id: str, text: str) -> list[Frame]:
        if not text:
            return []
        thought = kind is EventKind.AGENT_THOUGHT_CHUNK
        chunk = Event(self.session_id, AgentTextChunk(message_id, text, 0, thought=thought))
        self._delivered[message_id] = 0
        return self._render(chunk, None)[0]

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
            frames, delivered = self._render(ev, None)
            self._emit(frames, delivered, None)

    def _render(self, event: Event, shared: Shared | None) -> tuple[list[Frame], int]:
        """The frames for `event` (updating what this client has been sent), and the
        cursor a resync must name if they do not fit. `shared`: the publish's frames, when
        this client may take them (the same event, rendered at the same cursor)."""
        delivered = self.last_seq
        if event.seq is not None:
            if event.seq <= delivered:
                return [], delivered
            self.last_seq = event.seq
        origin = event.origin
        if origin is not None and origin == self.sink.id and event.kind is EventKind.USER_MESSAGE:
            return [], delivered  # the sender already has its own prompt
        update = event.update
        mid: str | None = None  # a final text's message
        sent: Event | None = event
        match update:  # the type once (a chunk's and a final's fields read as they are)
            case AgentTextChunk():
                # The common chunk written out: the next one of a message this client has
                # followed from its start (`_chunk` would send it whole); the rest there.
                cid, text, offset = update.message_id, update.text, update.offset
                progress = self._delivered
                if text and cid in progress and progress[cid] == offset and cid not in self._missed:
                    progress[cid] = offset + len(text)
                else:
                    sent = self._chunk(event, cid, text, offset)
            case AgentText():
                mid = update.message_id
            case Unparsed() if update.kind in _CHUNKS:
                p = event.payload
                sent = self._chunk(event, p["messageId"], p["text"], int(p.get("offset", 0)))
            case Unparsed() if update.kind in _FINALS:
                mid = event.payload["messageId"]
        if sent is not event:  # a chunk this client has (in part): nothing, or its own rest
            if sent is None:
                return [], delivered
            event, shared = sent, None
        renderer = self.renderer
        if shared is None:
            frames = renderer.live(event, self.last_seq)
        else:
            if shared.last_seq != self.last_seq:  # all live clients normally share one cursor
                shared.frames = renderer.live(event, self.last_seq)
                shared.texts = {}
                shared.last_seq = self.last_seq
            frames = shared.frames
        if mid is not None:
            seen = self._delivered.pop(mid, None) is not None
            if mid in self._missed or not seen:
                # The client has none (or not the start) of this text — a message that
                # ended without streaming to it (recovered after a crash, or watched from
                # another replica): its whole text first, transient, then the event's own
                # frames as every client gets them — one form per seq.
                self._missed.discard(mid)
                frames = renderer.missed(event, delivered) + frames
        client = self._filtering
        if client is not None:
            # One frame the renderer named the gate of: asked once per kind, not per frame.
            gate = frames.gate if type(frames) is Gated else None
            if gate is None:
                frames = renderer.for_client(frames, event, client.supports_update, self.last_seq)
            elif gate:
                allowed = self._allowed
                if gate not in allowed:
                    allowed[gate] = client.supports_update(gate)
                if not allowed[gate]:
                    frames = renderer.for_client(frames, event, client.supports_update, self.last_seq)
        return frames, delivered

    def _chunk(self, event: Event, mid: str, text: str, offset: int) -> Event | None:
        """What this client gets of a streamed chunk: all of it (`event`), the part it
        lacks (a new event), or nothing (None)."""
        if mid in self._missed:
            return None
        if mid not in self._delivered:
            if offset > 0:
                self._missed.add(mid)  # the start went by before we attached
                return None
            self._delivered[mid] = 0
        if offset > self._delivered[mid]:
            # Chunks in between were discarded (a replay's buffer overflowed): hold the
            # rest back; the final event then brings the whole text.
            self._missed.add(mid)
            return None
        already = self._delivered[mid] - offset
        size = len(text)
        if already >= size:
            return None  # a client seeded with the partial text has this part
        if already > 0 and isinstance(event.update, AgentTextChunk):
            rest = dataclasses.replace(event.update, text=text[already:], offset=offset + already)
            event = Event(event.session_id, rest)  # its own frames, not the shared ones
        self._delivered[mid] = offset + size
        return event

    def _emit(self, frames: list[Frame], delivered: int, shared: Shared | None) -> None:
        # A frame that is one of the shared ones (by identity: a client-specific frame is
        # never mistaken for a shared one) goes out as the text encoded once for all.
        encoded_sink = self._encoded if shared is not None else None
        for method, params in frames:
            text = None
            if encoded_sink is not None:
                assert shared is not None
                for i, (_, shared_params) in enumerate(shared.frames):
                    if shared_params is params:
                        texts = shared.texts
                        text = texts[i] if i in texts else None
                        if text is None:
                            text = texts[i] = self.renderer.encode(shared.frames[i])
                        break
            if text is None:
                sent = self.sink.send_notification(method, params)
            else:
                assert encoded_sink is not None
                sent = encoded_sink.send_encoded(text)
            if not sent:
                self._fell_behind(delivered)
                return

    def _fell_behind(self, delivered: int) -> None:
        self.dropped = True
        log.warning("client %s fell behind; it is told to resync", self.sink.id)
        resync = urgent(self.sink)
        if resync is not None:
            # `delivered`: the last durable event this client really got.
            slow = ResyncReason.CLIENT_TOO_SLOW
            resync.send_urgent(*self.renderer.resync(self.session_id, delivered, slow))


class EventHub:
    def __init__(self, *, render: Renderer, on_drop: Callable[[], None] | None = None) -> None:
        self._render = render
        self._subscribers: dict[str, Subscriber] = {}
        self._each: tuple[tuple[str, Subscriber], ...] = ()  # its items, as `publish` walks them
        self._on_drop = on_drop  # a client fell behind and was told to resync
        self._spare: Shared | None = Shared(None)  # see `publish`
        # The last durable seq published (a transient one published now follows it).
        self.seq = 0

    def subscribe(self, sink: FrameSink, session_id: str = "") -> Subscriber:
        sub = Subscriber(sink, session_id, render=self._render)
        self.unsubscribe(sink.id)  # a re-attach replaces the connection's subscription
        self._subscribers[sink.id] = sub
        self._each = tuple(self._subscribers.items())
        return sub

    def unsubscribe(self, sink_id: str) -> None:
        sub = self._subscribers.pop(sink_id, None)
        if sub is not None:
            sub.detached = True
            self._each = tuple(self._subscribers.items())

    def get(self, sink_id: str) -> Subscriber | None:
        return self._subscribers.get(sink_id)

    def publish(self, *events: Event) -> None:
        """Deliver `events` in order to every subscriber: one (a streamed chunk published at
        once, a watching replica's event) or a committed batch's run of one session's events
        (the writer passes a run in one call when `PUBLISH_RUNS`: a call per batch, not per
        event). In a run, an event a subscriber broke on is logged and the next one still
        delivered, as the writer does for one event's call."""
        # Rendered and encoded once for every client that gets the same: the hub's one
        # `Shared`, reset per event (a publish made while delivering these gets its own).
        shared = self._spare
        if shared is None:
            shared = Shared(None)
        else:
            self._spare = None
        render = self._render
        each = self._each  # (flushed at the end: `Subscriber._flush`)
        try:
            for event in events:
                if event.seq is not None:
                    self.seq = event.seq
                shared.event, shared.last_seq = event, -1
                try:
                    # What `_render` does for every client alike, asked once per event: `fast` when
                    # it needs none of its rarer steps (an older server's update, an empty chunk, a
                    # user message its sender must not get back); per client below, whether a chunk
                    # continues (or starts) what it has and a final text ends a message it was
                    # streamed.
                    update = event.update
                    seq = event.seq
                    cid, offset, end = "", 0, 0
                    chunk = final = False
                    if type(update) is AgentTextChunk:
                        chunk, fast = True, INLINE_RENDER and bool(update.text)
                        cid, offset = update.message_id, update.offset
                        end = offset + len(update.text)
                    elif type(update) is AgentText:
                        final, fast, cid = True, INLINE_RENDER, update.message_id
                    else:
                        fast = INLINE_RENDER and type(update) not in _OWN_STEPS
                        if fast and event.origin is not None and event.kind is EventKind.USER_MESSAGE:
                            fast = False
                    for sid, sub in self._each:
                        if sub._buffer is None and not sub.dropped:  # live: `deliver`, inline
                            delivered = sub.last_seq
                            if not fast:
                                frames, delivered = sub._render(event, shared)
                            elif seq is not None and seq <= delivered:
                                frames = []
                            elif chunk and (
                                cid in sub._missed
                                or (sub._delivered[cid] != offset if cid in sub._delivered else offset != 0)
                            ):
                                frames, delivered = sub._render(
                                    event, shared
                                )  # (`_chunk`: its part, or none)
                            elif final and (cid in sub._missed or cid not in sub._delivered):
                                frames, delivered = sub._render(event, shared)  # (the whole text first)
                            else:
                                # `_render`, written out for what every client gets as it is.
                                if seq is not None:
                                    sub.last_seq = seq
                                if chunk:
                                    sub._delivered[cid] = end
                                elif final:
                                    del sub._delivered[cid]  # the message is over (it was streamed to it)
                                cursor = sub.last_seq
                                if shared.last_seq != cursor:  # all live clients normally share one cursor
                                    shared.frames = render.live(event, cursor)
                                    shared.texts = {}
                                    shared.last_seq = cursor
                                frames = shared.frames
                                client = sub._filtering
                                if client is not None:
                                    gate = frames.gate if type(frames) is Gated else None
                                    if gate is None:
                                        frames = render.for_client(
                                            frames, event, client.supports_update, cursor
                                        )
                                    elif gate:
                                        allowed = sub._allowed
                                        if gate not in allowed:
                                            allowed[gate] = client.supports_update(gate)
                                        if not allowed[gate]:
                                            frames = render.for_client(
                                                frames, event, client.supports_update, cursor
                                            )
                            one = (
                                frames is shared.frames and type(frames) is Gated and frames.gate is not None
                            )
                            if not frames:
                                pass
                            elif one and sub._send is not None:
                                # The common case, `_emit` written out: one frame (a `Gated` list
                                # with a gate), the same for every client, encoded once and queued
                                # in one call.
                                texts = shared.texts
                                if 0 in texts:
                                    text = texts[0]
                                else:
                                    text = texts[0] = render.encode(frames[0])
                                if not sub._send(text):
                                    sub._fell_behind(delivered)
                            else:
                                sub._emit(frames, delivered, shared)
                        else:
                            sub.deliver(event, shared)
                        if sub.dropped:
                            self._subscribers.pop(sid, None)
                            self._each = tuple(self._subscribers.items())
                            if self._on_drop is not None:
                                self._on_drop()
                except Exception:
                    if len(events) == 1:
                        raise  # the caller's to log, as for any one publish
                    log.exception("publishing event failed")
        finally:
            shared.event, shared.frames, shared.texts = None, [], {}  # holds nothing past the publish
            self._spare = shared
            # What each client's connection held back goes out (or wakes its writer) now:
            # also a subscriber dropped on the way, whose resync must not wait.
            for _, sub in each:
                flush = sub._flush
                if flush is not None:
                    flush()
            if self._each is not each:  # (a subscriber came or went meanwhile)
                for _, sub in self._each:
                    flush = sub._flush
                    if flush is not None:
                        flush()

    def resync_all(self, reason: ResyncReason) -> None:
        """End every subscription, telling each client to resync from the last durable
        event it got (the session's live stream ends here, e.g. its actor failed)."""
        for sub in self._subscribers.values():
            resync = urgent(sub.sink)
            if resync is not None:
                resync.send_urgent(*self._render.resync(sub.session_id, sub.last_seq, reason))
        self._subscribers.clear()
        self._each = ()

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
