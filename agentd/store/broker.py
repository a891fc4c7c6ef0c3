"""A message broker for what is live only (issue 26): publish bytes on a channel, subscribe
to a channel as an async iterator — the way LangGraph Platform keeps streaming output on a
pub/sub channel while all run data stays in Postgres.

Nothing sent here is durable: a subscriber gets what is published while it is subscribed
and connected, and nothing else. A subscription says when it may have missed messages — the
broker's connection was re-established (`Gap.RECONNECTED`) or the subscriber fell behind its
bounded queue (`Gap.OVERFLOWED`) — so its consumer can fall back on the durable record.

Two implementations behind one `Broker` interface: Redis pub/sub (agentd/store/redis_broker.py,
when `AGENTD_REDIS_URL` is set) and Postgres NOTIFY (`PgBroker`, below: the process's one
LISTEN connection, agentd/store/notify.py, carries it; a message longer than a NOTIFY payload
may be is sent as fragments in one transaction and put together again).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import enum
import functools
import hashlib
import logging
import os
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import orjson

from agentd.store.notify import PgListener, asyncpg_dsn

log = logging.getLogger(__name__)

SUBSCRIPTION_LIMIT = 1_000  # messages a subscriber may have unread before it loses them
PG_PAYLOAD_LIMIT = 7_900  # bytes: Postgres refuses a NOTIFY payload of 8000 or more
PG_PUBLISH_TIMEOUT_S = 5.0
_ASSEMBLING_LIMIT = 64  # fragmented messages being put together at once (per broker)


class Gap(enum.Enum):
    """Why a subscription may have missed messages."""

    RECONNECTED = "reconnected"  # the broker's connection was lost and is back
    OVERFLOWED = "overflowed"  # the subscriber fell behind: unread messages were dropped


class Subscription:
    """One subscriber of one channel: an async iterator of messages (`bytes`) and `Gap`s, its
    queue bounded (past `limit` unread, they are dropped for one `Gap.OVERFLOWED`)."""

    def __init__(
        self, channel: str, close: Callable[[Subscription], Awaitable[None]], limit: int = SUBSCRIPTION_LIMIT
    ) -> None:
        self.channel = channel
        self._close = close
        self._limit = limit
        self._items: deque[bytes | Gap] = deque()
        self._ready = asyncio.Event()
        self.closed = False

    def put(self, item: bytes | Gap) -> None:
        if self.closed:
            return
        if len(self._items) >= self._limit:
            self._items.clear()
            item = Gap.OVERFLOWED
        self._items.append(item)
        self._ready.set()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> bytes | Gap:
        while not self._items:
            if self.closed:
                raise StopAsyncIteration
            self._ready.clear()
            await self._ready.wait()
        return self._items.popleft()

    async def aclose(self) -> None:
        if not self.closed:
            self.closed = True
            self._ready.set()  # an iterating consumer ends
            await self._close(self)


class Broker(Protocol):
    async def publish(self, channel: str, data: bytes) -> None:
        """Send `data` to the channel's current subscribers (raises when the broker is
        unreachable; nothing is kept for later)."""
        ...

    async def publish_many(self, messages: Sequence[tuple[str, bytes]]) -> None:
        """`publish` of each (channel, data), in order, in as few round trips as can be."""
        ...

    async def subscribe(self, channel: str) -> Subscription:
        """A new subscription to `channel` (`aclose` it when done)."""
        ...

    async def close(self) -> None: ...


class Subscribers:
    """The subscriptions of a broker, by channel (both implementations keep them so)."""

    def __init__(self) -> None:
        self.by_channel: dict[str, set[Subscription]] = {}

    def add(self, sub: Subscription) -> bool:
        """True when `sub` is its channel's first subscriber."""
        subs = self.by_channel.setdefault(sub.channel, set())
        subs.add(sub)
        return len(subs) == 1

    def remove(self, sub: Subscription) -> bool:
        """True when `sub` was its channel's last subscriber."""
        subs = self.by_channel.get(sub.channel)
        if subs is None or sub not in subs:
            return False
        subs.discard(sub)
        if subs:
            return False
        del self.by_channel[sub.channel]
        return True

    def deliver(self, channel: str, item: bytes | Gap) -> None:
        for sub in list(self.by_channel.get(channel, ())):
            sub.put(item)

    def gap(self, reason: Gap) -> None:
        for subs in list(self.by_channel.values()):
            for sub in list(subs):
                sub.put(reason)


# ---------------------------------------------------------------------- Postgres NOTIFY


@functools.lru_cache(maxsize=4096)  # a session's channel per publish: hashed once, not per message
def pg_channel(channel: str) -> str:
    """A NOTIFY channel name for any channel: a short, fixed-shape identifier (Postgres cuts
    identifiers at 63 bytes and folds case; a session id may be anything)."""
    return "agentd_b_" + hashlib.sha1(channel.encode(), usedforsecurity=False).hexdigest()[:24]


def pg_fragments(message_id: str, data: bytes, limit: int = PG_PAYLOAD_LIMIT) -> list[str]:
    """`data` as NOTIFY payloads of at most `limit` bytes each: `<kind><id>:<i>:<n>:<part>`,
    kind `t` for UTF-8 text without NUL (sent as is), `b` for anything else (base64)."""
    try:
        text = data.decode()
        kind = "t" if "\x00" not in text else "b"
    except UnicodeDecodeError:
        kind = "b"
    body = data if kind == "t" else base64.b64encode(data)
    room = limit - len(message_id) - 24  # the header: kind, id, two counts, colons
    if len(body) <= room:  # the common message: one fragment, no cutting
        return [f"{kind}{message_id}:0:1:{text if kind == 't' else body.decode()}"]
    parts: list[bytes] = []
    start = 0
    while start < len(body) or not parts:
        end = min(start + room, len(body))
        while end < len(body) and (body[end] & 0xC0) == 0x80:  # not inside a UTF-8 character
            end -= 1
        parts.append(body[start:end])
        start = end
    n = len(parts)
    return [f"{kind}{message_id}:{i}:{n}:{part.decode()}" for i, part in enumerate(parts)]


class PgAssembler:
    """Puts fragmented NOTIFY payloads together again (a transaction's notifications arrive
    together and in order; a message whose fragments stop coming is dropped in time)."""

    def __init__(self, limit: int = _ASSEMBLING_LIMIT) -> None:
        self._limit = limit
        self._partial: OrderedDict[str, list[str]] = OrderedDict()

    def feed(self, payload: str) -> bytes | None:
        """The whole message once its last fragment came in; None meanwhile, and for a
        payload that is not ours (anyone may NOTIFY any channel)."""
        head, sep, part = payload.partition(":")
        index, sep2, rest = part.partition(":")
        count, sep3, fragment = rest.partition(":")
        if not (sep and sep2 and sep3 and head[:1] in ("t", "b") and index.isdigit() and count.isdigit()):
            return None
        kind, message_id, i, n = head[0], head[1:], int(index), int(count)
        if n == 1 and i == 0:
            return _decoded(kind, fragment)
        parts = self._partial.get(message_id)
        if parts is None:
            if i != 0:
                return None  # its start went by (or never came): the message is lost
            parts = self._partial[message_id] = []
            while len(self._partial) > self._limit:
                self._partial.popitem(last=False)
        if i != len(parts) or i >= n:
            self._partial.pop(message_id, None)
            return None
        parts.append(fragment)
        if len(parts) < n:
            return None
        del self._partial[message_id]
        return _decoded(kind, "".join(parts))


def _decoded(kind: str, text: str) -> bytes | None:
    if kind == "t":
        return text.encode()
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        return None


# A payload never holds a NUL (`pg_fragments`: base64 then), the one escape `->>` refuses.
_PUBLISH = (
    "SELECT pg_notify(n->>0, n->>1) FROM json_array_elements($1::json) WITH ORDINALITY AS t(n, i) ORDER BY i"
)


class PgBroker:
    """Postgres NOTIFY as the broker: subscriptions ride on the process's LISTEN connection
    (`listener`); messages go out on a connection of their own (a pool under load must not
    hold live text up), each batch in one statement — one transaction."""

    def __init__(self, database_url: str, listener: PgListener) -> None:
        self._dsn = asyncpg_dsn(database_url)
        self._listener = listener
        self._subscribers = Subscribers()
        self._assembler = PgAssembler()
        self._conn: Any = None
        self._sending = asyncio.Lock()  # one statement at a time on the connection
        self._sender = os.urandom(4).hex()  # message ids unique across processes
        self._count = 0

    async def publish(self, channel: str, data: bytes) -> None:
        await self.publish_many([(channel, data)])

    async def publish_many(self, messages: Sequence[tuple[str, bytes]]) -> None:
        # One json parameter of [channel, payload] pairs, not two text arrays: asyncpg checks
        # an array and each of its elements against `collections.abc` classes in Python
        # (~12 calls a batch), a text parameter not at all (issue 32).
        notes: list[tuple[str, str]] = []
        for channel, data in messages:
            self._count += 1
            name = pg_channel(channel)
            for fragment in pg_fragments(f"{self._sender}{self._count:x}", data):
                notes.append((name, fragment))
        if not notes:
            return
        async with self._sending:
            conn = await self._connection()
            try:
                await conn.execute(_PUBLISH, orjson.dumps(notes).decode(), timeout=PG_PUBLISH_TIMEOUT_S)
            except BaseException:
                self._conn = None  # broken or timed out mid-statement: never reused
                conn.terminate()
                raise

    async def _connection(self) -> Any:
        if self._conn is None or self._conn.is_closed():
            import asyncpg  # type: ignore[import-untyped]

            self._conn = await asyncpg.connect(self._dsn, timeout=PG_PUBLISH_TIMEOUT_S)
        return self._conn

    async def subscribe(self, channel: str) -> Subscription:
        sub = Subscription(channel, self._unsubscribe)
        if self._subscribers.add(sub):
            await self._listener.listen(pg_channel(channel), lambda payload: self._received(channel, payload))
        return sub

    async def _unsubscribe(self, sub: Subscription) -> None:
        if self._subscribers.remove(sub):
            await self._listener.unlisten(pg_channel(sub.channel))

    def _received(self, channel: str, payload: str) -> None:
        data = self._assembler.feed(payload)
        if data is not None:
            self._subscribers.deliver(channel, data)

    async def reconnected(self) -> None:
        """The LISTEN connection is back (call from the listener's `on_connect`): what was
        sent meanwhile is gone."""
        self._subscribers.gap(Gap.RECONNECTED)

    async def close(self) -> None:
        async with self._sending:
            if self._conn is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._conn.close(), 2)
                self._conn = None
