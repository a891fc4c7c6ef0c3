"""Live text on every replica (issue 26 item 4): a session's transient events — streamed
text and thought chunks, tool progress — are not in the log, so a replica that does not own
the session cannot read them there. The owner also sends each one through the broker
(agentd/store/broker.py: Redis pub/sub or Postgres NOTIFY) on the session's channel; a replica
watching the session for its clients (agentd/session/replicas/remote.py) forwards them into its hub,
in order with the durable events it reads from the log.

The order: each message carries `after`, the seq of the last durable event the owner had
published before it. The relay forwards it right after that event (holding it while the log
tail is behind, which it wakes). A chunk of a message whose final durable event has gone by
is dropped (its text came with it); when a message's final text is longer than the chunks
that arrived (the last ones late or lost), the missing end goes out as one chunk just before
the final event — so a client here gets the frames a client of the owner gets, and never a
text twice. Lost messages are acceptable (they are transient): the durable event arrives anyway.

The owner sends them only while another replica watches the session (live_watch.py): the
watcher announces its watch on the broker, the owner's `LivePublisher.watched` remembers it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import orjson

from agentd.core import AgentTextChunk, Event, EventKind
from agentd.core import decode as decode_update
from agentd.session.replicas import live_watch
from agentd.session.replicas.live_watch import (
    WATCH_CHANNEL,
    WATCH_INTERVAL_S,
    WHO_CHANNEL,
    Watched,
    subscribe,
    who_message,
)
from agentd.session.replicas.stopping import cancel_and_wait

if TYPE_CHECKING:
    from agentd.store import Broker, Gap, Subscription

log = logging.getLogger(__name__)

CHUNKS = (EventKind.AGENT_MESSAGE_CHUNK, EventKind.AGENT_THOUGHT_CHUNK)
FINALS = {
    EventKind.AGENT_MESSAGE: EventKind.AGENT_MESSAGE_CHUNK,
    EventKind.AGENT_THOUGHT: EventKind.AGENT_THOUGHT_CHUNK,
}
OUTBOX_LIMIT = 10_000  # messages waiting for the broker (per process); past it the oldest go
BATCH_LIMIT = 500  # messages per round trip to the broker
HELD_LIMIT = 1_000  # messages a relay holds while its log tail is behind
MESSAGES_TRACKED = 256  # in-flight and recently finished message ids a relay remembers


def live_channel(session_id: str) -> str:
    return f"live:{session_id}"


def encode(session_id: str, after: int, event: Event) -> bytes:
    """One transient event as the broker carries it (encoded once, whoever listens; its
    payload is the event's own bytes, not encoded again)."""
    message = {"s": session_id, "a": after, "k": event.kind.value, "p": orjson.Fragment(event.data)}
    return orjson.dumps(message)


def decode(data: bytes, session_id: str) -> tuple[int, Event] | None:
    """(after, event) of a message on the session's channel; None for anything else."""
    try:
        raw = orjson.loads(data)
        kind = EventKind(raw["k"])
        after, payload = raw["a"], raw["p"]
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    if raw.get("s") != session_id or not isinstance(after, int) or not isinstance(payload, dict):
        return None
    if kind in CHUNKS and not (
        isinstance(payload.get("messageId"), str) and isinstance(payload.get("text"), str)
    ):
        return None
    return after, Event(session_id, decode_update(kind, payload))


class LivePublisher:
    """The owner's side, one per process: transient events queue here (bounded, never
    awaited by the actor) and go to the broker in batches, one round trip per batch. A
    broker that fails loses the batch: its text reaches other replicas' clients with the
    durable event.

    `watched(session_id)`: whether another replica watches the session now (heard on the
    broker, live_watch.py) — the journal sends a transient event here only then. The
    announcements this process makes as a watcher go out through the same outbox (`send`)."""

    def __init__(
        self, broker: Broker, *, limit: int = OUTBOX_LIMIT, interval_s: float = WATCH_INTERVAL_S
    ) -> None:
        self.broker = broker
        self._outbox: deque[tuple[str, bytes]] = deque(maxlen=limit)
        self._ready = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.watched = Watched(interval_s)
        self.published = 0  # transient events queued for the broker
        self.sent = 0  # messages the broker took (events and announcements)
        self.dropped = 0  # outbox overflow or a failed send
        self._failing = False

    def publish(self, session_id: str, after: int, event: Event) -> None:
        self.published += 1
        self.send(live_channel(session_id), encode(session_id, after, event))

    def send(self, channel: str, data: bytes) -> None:
        if len(self._outbox) == self._outbox.maxlen:
            self.dropped += 1
        self._outbox.append((channel, data))
        self._ready.set()

    def owned(self, session_id: str) -> None:
        """This process has just taken the session (a start, a restart, a takeover): ask
        whether another replica watches it already (the watchers answer at once)."""
        if live_watch.LIVE_ON_DEMAND:
            self.send(WHO_CHANNEL, who_message(session_id))

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._run(), name="live-publisher"),
            asyncio.create_task(self._hear(), name="live-watched"),
        ]

    async def _hear(self) -> None:
        """Follow the watchers' announcements; ask them all again after subscribing and
        after each gap (announcements may have gone by unheard)."""
        subscription = await subscribe(self.broker, WATCH_CHANNEL)
        self.send(WHO_CHANNEL, who_message(None))
        try:
            async for item in subscription:
                if self.watched.received(item):
                    self.send(WHO_CHANNEL, who_message(None))
        finally:
            with contextlib.suppress(Exception):
                await subscription.aclose()

    async def _run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready.clear()
            while self._outbox:
                batch = [self._outbox.popleft() for _ in range(min(BATCH_LIMIT, len(self._outbox)))]
                try:
                    await self.broker.publish_many(batch)
                except Exception as exc:  # transient: the durable events still carry the text
                    self.dropped += len(batch)
                    if not self._failing:
                        log.warning(
                            "live events not sent to the broker (%s); clients elsewhere wait for the log", exc
                        )
                    self._failing = True
                else:
                    self.sent += len(batch)
                    if self._failing:
                        log.info("live events reach the broker again")
                    self._failing = False

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks = []


class LiveFeed:
    """An owner actor's publish: its own hub first, then — for a transient event, when the
    process has a broker — the broker, stamped with the last durable seq published before it.
    (The journal calls it for a transient event only while the session is watched elsewhere.)"""

    def __init__(
        self,
        session_id: str,
        local: Callable[[Event], None],
        publisher: Callable[[], LivePublisher | None],
        seq: int,
    ) -> None:
        self._session_id = session_id
        self._local = local
        self._publisher = publisher  # read per event: the broker may start after the actor
        self.seq = seq
        now = publisher()
        if now is not None:  # a new owner: watchers elsewhere say so at once (live_watch.py)
            now.owned(session_id)

    def __call__(self, event: Event) -> None:
        self._local(event)
        if event.seq is not None:
            self.seq = event.seq
            return
        publisher = self._publisher()
        if publisher is not None:
            publisher.publish(self._session_id, self.seq, event)


class LiveRelay:
    """A watching replica's side for one session: broker messages into `publish` (the
    watch's hub) in order with the durable events the log tail publishes (`before` and
    `after` each of them)."""

    def __init__(
        self, session_id: str, publish: Callable[[Event], None], *, cursor: int, wake: Callable[[int], None]
    ) -> None:
        self.session_id = session_id
        self._publish = publish
        self._wake = wake  # the log tail: it holds events up to this seq
        self._start = cursor  # a message stamped before the watch began belongs to what it read
        self.cursor = cursor  # the last durable seq published
        self._held: deque[tuple[int, Event]] = deque()
        # Message id → end of the text forwarded so far (None: finished, its final went by).
        self._messages: OrderedDict[str, int | None] = OrderedDict()
        self.forwarded = 0
        self.gaps = 0

    def received(self, item: bytes | Gap) -> None:
        if not isinstance(item, bytes):
            self.gaps += 1  # lost messages: the durable events fill in
            return
        decoded = decode(item, self.session_id)
        if decoded is None:
            return
        after, event = decoded
        if after < self._start:
            return
        if after > self.cursor:
            if len(self._held) >= HELD_LIMIT:
                self._held.popleft()
            self._held.append((after, event))
            self._wake(after)  # the commit it follows may not be announced yet
            return
        self._forward(event)

    def before(self, event: Event) -> None:
        """Called before the durable `event` is published: what came before it goes first;
        a final text longer than what was streamed gets its missing end as a chunk."""
        assert event.seq is not None
        self._release(event.seq - 1)
        chunk = FINALS.get(event.kind)
        if chunk is None:
            return
        mid, text = event.payload.get("messageId"), event.payload.get("text")
        if not isinstance(mid, str) or not isinstance(text, str):
            return
        end = self._messages.get(mid)
        self._track(mid, None)
        if end is not None and end < len(text):
            rest = AgentTextChunk(mid, text[end:], end, thought=chunk is EventKind.AGENT_THOUGHT_CHUNK)
            self.forwarded += 1
            self._publish(Event(self.session_id, rest))

    def after(self, event: Event) -> None:
        assert event.seq is not None
        self.cursor = max(self.cursor, event.seq)
        self._release(self.cursor)

    def _release(self, up_to: int) -> None:
        while self._held and self._held[0][0] <= up_to:
            self._forward(self._held.popleft()[1])

    def _forward(self, event: Event) -> None:
        if event.kind in CHUNKS:
            mid = event.payload["messageId"]
            if mid in self._messages and self._messages[mid] is None:
                return  # finished: its final text went out already
            end = int(event.payload.get("offset", 0)) + len(event.payload["text"])
            self._track(mid, max(end, self._messages.get(mid) or 0))
        self.forwarded += 1
        self._publish(event)

    def _track(self, mid: str, end: int | None) -> None:
        self._messages[mid] = end
        self._messages.move_to_end(mid)
        while len(self._messages) > MESSAGES_TRACKED:
            self._messages.popitem(last=False)


async def run_relay(subscription: Subscription, relay: LiveRelay) -> None:
    """Feed `relay` from `subscription` until cancelled (then unsubscribe)."""
    try:
        async for item in subscription:
            try:
                relay.received(item)
            except Exception:  # one bad message must not end the session's live text here
                log.exception("%s: forwarding a live event failed", relay.session_id)
    finally:
        with contextlib.suppress(Exception):
            await subscription.aclose()


__all__ = ["LiveFeed", "LivePublisher", "LiveRelay", "decode", "encode", "live_channel", "run_relay"]
