"""Sessions owned by another replica, watched from this one (R-C1, issue 15 item 2).

The owner's actor publishes its events to its own clients; a client attached here gets
them from the log — never from a second copy of the stream. A `LogTail` keeps a cursor
(the last seq it published) and, when woken by a NOTIFY saying "up to seq N", reads every
event after the cursor from the store and publishes them in order. Notifications may be
coalesced, duplicated, late, out of order or lost (across a reconnect of the listener):
none of that matters, because the tail reads what the log holds after its cursor — so an
event is published exactly once, in seq order, with no gap. A wake-up with no seq ("maybe
something": the listener reconnected) makes it look anyway.

Nothing strands the tail's clients silently (issue 26 item 2): a read that fails (the
database restarting, a pooled connection cut by a reset) is retried with backoff, and a
page that does not continue the cursor (a gap: never expected, the log has none) is read
again — but once the tail has not been able to move on for `stuck_after_s`, it stops and
calls `on_stuck`, whose owner tells the clients to resync.

`LogTails` is the per-process registry the listener's handler feeds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from agentd.core import Event, EventKind
from agentd.store import Store, StoredEvent, parse_events_payload

log = logging.getLogger(__name__)

PAGE_SIZE = 500
RETRY_FIRST_S = 0.05  # a failed read is tried again after this, doubling up to the cap
RETRY_MAX_S = 1.0
STUCK_AFTER_S = 10.0  # the server passes its lease time: a client hears within it
# The events channel listened to only while a log is followed here (`LogTails`); False: from
# the listener's start, always (the old way).
EVENTS_ON_DEMAND = True

# (session id, after seq, limit) → that page of the log: a `LogReads.read`, shared by the
# process's tails (agentd/session/replicas/log_reads.py); by default the store's own read.
Read = Callable[[str, int, int], Awaitable[list[StoredEvent]]]
Listening = Callable[[], Awaitable[None]]  # LISTEN / UNLISTEN on the events channel


class LogGap(Exception):
    """The log's next event after the cursor is not the cursor's successor."""

    def __init__(self, session_id: str, cursor: int, seq: int) -> None:
        super().__init__(f"{session_id}: the log continues at seq {seq} after {cursor}")


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
        on_stuck: Callable[[], None] | None = None,
        stuck_after_s: float = STUCK_AFTER_S,
        read: Read | None = None,
    ) -> None:
        self.session_id = session_id
        self.cursor = after_seq  # the last seq published
        self._store = store
        self._read = read
        self._publish = publish
        self._page = page_size
        self._wake = asyncio.Event()
        self._reading = asyncio.Lock()  # one catch-up at a time: each event published once
        self.reads = 0  # store reads so far (tests, metrics)
        # From a wake-up (a NOTIFY) to its events published: the `agentd_notify_lag` metric.
        self._observe_lag = observe_lag
        self._woken_at: float | None = None
        self._on_stuck = on_stuck
        self._stuck_after = stuck_after_s
        self.failures = 0  # reads that failed so far (tests, logs)
        self.stuck = False  # gave up: `on_stuck` was called and `run` returned
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
        """Publish new events as they are announced, until cancelled — or until the log
        could not be followed for `stuck_after_s` (then `on_stuck`, and it returns)."""
        loop = asyncio.get_running_loop()
        failing_since: float | None = None
        delay = RETRY_FIRST_S
        while True:
            await self._wake.wait()
            self._wake.clear()
            woken, self._woken_at = self._woken_at, None
            attempt = loop.time()
            try:
                async with asyncio.timeout(self._stuck_after):  # a read hung on a dead connection
                    await self.catch_up()
            except Exception as exc:  # the database away, a gap: not the end of the watch yet
                self.failures += 1
                now = loop.time()
                failing_since = attempt if failing_since is None else failing_since
                if now - failing_since >= self._stuck_after:
                    log.error("%s: the log cannot be followed (%s); its clients resync", self.session_id, exc)
                    self.stuck = True
                    if self._on_stuck is not None:
                        self._on_stuck()
                    return
                log.warning("%s: reading the log failed (%s); retrying in %.2fs", self.session_id, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                self._woken_at = woken if self._woken_at is None else self._woken_at
                self._wake.set()  # whatever was announced is still to be read
                continue
            failing_since, delay = None, RETRY_FIRST_S
            if woken is not None and self._observe_lag is not None:
                self._observe_lag(loop.time() - woken)

    async def catch_up(self) -> None:
        """Publish every event the log holds after the cursor (also called directly, to be
        sure everything committed so far is published)."""
        async with self._reading:
            await self._catch_up()

    async def caught_up(self) -> None:
        """Everything announced so far published: at once when it is (a routed command's
        answer arrives on the listener after the notification of the events committed
        before it), else after a read — or after the read in flight, when that one covered
        it (a routed prompt's answer usually comes while its turn's last events are being
        read: a second read would put one more round trip before the answer)."""
        if self._behind():
            async with self._reading:
                if self._behind():
                    await self._catch_up()

    def _behind(self) -> bool:
        return self._unsure or self.cursor < self.announced

    async def _catch_up(self) -> None:
        self._unsure = False  # (a wake-up without a seq during this read sets it again)
        while True:
            if self._read is not None:
                page = await self._read(self.session_id, self.cursor, self._page)
            else:
                page = await self._store.read_events(self.session_id, after_seq=self.cursor, limit=self._page)
            self.reads += 1
            for stored in page:
                if stored.seq != self.cursor + 1:
                    raise LogGap(self.session_id, self.cursor, stored.seq)
                try:
                    kind = EventKind(stored.kind)
                except ValueError:  # written by a newer replica: skip it, keep the order
                    log.warning("%s: unknown event kind %r", self.session_id, stored.kind)
                else:
                    self._publish(Event.stored(self.session_id, kind, stored.payload, stored.seq))
                self.cursor = stored.seq
            if len(page) < self._page:
                return


class LogTails:
    """The tails of this process, by session id, woken by the events channel.

    The channel is listened to only while the process follows a log (`on_demand`): every
    commit of every replica NOTIFYs it, the owner's own included, and a replica watching no
    session owned elsewhere has nobody to wake — on a single replica that was two
    notifications read and parsed per trivial turn for nothing (issue 32). `follow` comes
    before a tail's cursor is read, so every commit after that read is announced to it; the
    last tail's `remove` stops listening (in a task of its own, unless one followed meanwhile).
    `EVENTS_ON_DEMAND = False`: always listened to.
    """

    def __init__(self) -> None:
        self._tails: dict[str, LogTail] = {}
        self._listen: Listening | None = None
        self._unlisten: Listening | None = None
        self._pending = 0  # follows whose tail is not added yet (watches being made)
        self._stopping: set[asyncio.Task[None]] = set()

    def on_demand(self, listen: Listening, unlisten: Listening) -> bool:
        """Listen to the events channel with `listen` while anything follows, `unlisten`
        after; False when `EVENTS_ON_DEMAND` is off (the caller listens from the start)."""
        if not EVENTS_ON_DEMAND:
            return False
        self._listen, self._unlisten = listen, unlisten
        return True

    @property
    def listening(self) -> bool:
        """Whether the events channel is wanted now: always without `on_demand`."""
        return self._listen is None or bool(self._tails) or self._pending > 0

    async def follow(self) -> None:
        """Commits announced here from now on, until the tail `add`ed next is removed (or
        `unfollow`): called before that tail's cursor is read."""
        self._pending += 1
        if self._listen is not None:
            try:
                await self._listen()
            except BaseException:
                self.unfollow()
                raise

    def unfollow(self) -> None:
        """A `follow` given back without a tail (the watch it was for was not made)."""
        self._pending -= 1
        self._maybe_stop()

    def add(self, tail: LogTail) -> None:
        """`tail`, woken from now on (it takes over a `follow` made for it)."""
        if self._pending > 0:
            self._pending -= 1
        self._tails[tail.session_id] = tail

    def remove(self, session_id: str) -> None:
        if self._tails.pop(session_id, None) is not None:
            self._maybe_stop()

    def _maybe_stop(self) -> None:
        if self._unlisten is not None and not self.listening:
            task = asyncio.get_running_loop().create_task(self._stop_listening())
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)

    async def _stop_listening(self) -> None:
        if self._unlisten is not None and not self.listening:  # (none followed since)
            await self._unlisten()

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

    async def stop(self) -> None:
        """The stops of the listening under way, waited for."""
        if self._stopping:
            await asyncio.wait(set(self._stopping))
