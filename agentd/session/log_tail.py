"""Sessions owned by another replica, watched from this one (R-C1, issue 15 item 2).

The owner's actor publishes its events to its own clients; a client attached here gets
them from the log — never from a second copy of the stream. A `LogTail` keeps a cursor
(the last seq it published) and, when woken by a NOTIFY saying "up to seq N", reads every
event after the cursor from the store and publishes them in order. Notifications may be
coalesced, duplicated, late, out of order or lost (across a reconnect of the listener):
none of that matters, because the tail reads what the log holds after its cursor — so an
event is published exactly once, in seq order, with no gap. A wake-up with no seq ("maybe
something": the listener reconnected) makes it look anyway.

`LogTails` is the per-process registry the listener's handler feeds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from agentd.core.events import Event, EventKind
from agentd.store.db import Store
from agentd.store.notify import parse_events_payload

log = logging.getLogger(__name__)

PAGE_SIZE = 500


class LogTail:
    def __init__(
        self,
        store: Store,
        session_id: str,
        publish: Callable[[Event], None],
        *,
        after_seq: int,
        page_size: int = PAGE_SIZE,
        observe_lag: Callable[[float], None] | None = None,
    ) -> None:
        self.session_id = session_id
        self.cursor = after_seq  # the last seq published
        self._store = store
        self._publish = publish
        self._page = page_size
        self._wake = asyncio.Event()
        self._reading = asyncio.Lock()  # one catch-up at a time: each event published once
        self.reads = 0  # store reads so far (tests, metrics)
        # From a wake-up (a NOTIFY) to its events published: the `agentd_notify_lag` metric.
        self._observe_lag = observe_lag
        self._woken_at: float | None = None
        # The highest seq announced, and whether a wake-up without one came since the last
        # read: `caught_up` reads only when something may not be published yet.
        self.announced = after_seq
        self._unsure = False

    def wake(self, seq: int | None = None) -> None:
        """The log holds events up to `seq` (None: it may hold new ones)."""
        if seq is None:
            self._unsure = True
        else:
            self.announced = max(self.announced, seq)
        if seq is None or seq > self.cursor:
            if self._woken_at is None:
                self._woken_at = asyncio.get_running_loop().time()
            self._wake.set()

    async def run(self) -> None:
        """Publish new events as they are announced, until cancelled."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            woken, self._woken_at = self._woken_at, None
            await self.catch_up()
            if woken is not None and self._observe_lag is not None:
                self._observe_lag(asyncio.get_running_loop().time() - woken)

    async def catch_up(self) -> None:
        """Publish every event the log holds after the cursor (also called directly, to be
        sure everything committed so far is published)."""
        async with self._reading:
            await self._catch_up()

    async def caught_up(self) -> None:
        """Everything announced so far published: at once when it is (a routed command's
        answer arrives on the listener after the notification of the events committed
        before it), else after a read."""
        if self._unsure or self.cursor < self.announced:
            await self.catch_up()

    async def _catch_up(self) -> None:
        self._unsure = False  # (a wake-up without a seq during this read sets it again)
        while True:
            page = await self._store.read_events(self.session_id, after_seq=self.cursor, limit=self._page)
            self.reads += 1
            for stored in page:
                try:
                    kind = EventKind(stored.kind)
                except ValueError:  # written by a newer replica: skip it, keep the order
                    log.warning("%s: unknown event kind %r", self.session_id, stored.kind)
                else:
                    self._publish(Event(self.session_id, kind, stored.payload, seq=stored.seq))
                self.cursor = stored.seq
            if len(page) < self._page:
                return


class LogTails:
    """The tails of this process, by session id, woken by the events channel."""

    def __init__(self) -> None:
        self._tails: dict[str, LogTail] = {}

    def add(self, tail: LogTail) -> None:
        self._tails[tail.session_id] = tail

    def remove(self, session_id: str) -> None:
        self._tails.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._tails)

    def on_notification(self, payload: str) -> None:
        """A PgListener handler for the events channel."""
        parsed = parse_events_payload(payload)
        if parsed is None:
            log.debug("ignored a malformed events notification %r", payload[:100])
            return
        session_id, seq = parsed
        tail = self._tails.get(session_id)
        if tail is not None:
            tail.wake(seq)

    async def on_connect(self) -> None:
        """The listener (re)connected: what was announced meanwhile may have been missed."""
        for tail in list(self._tails.values()):
            tail.wake()
