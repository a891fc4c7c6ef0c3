"""Live events only while someone watches (issue 32, hpg): the owner of a session sends its
transient events to the broker (agentd/session/replicas/live.py) only while another replica
watches the session — in the common case (one replica, or a session only its owner's
clients follow) nothing goes to the broker at all: no encoding, no round trip per chunk.

A watching replica (agentd/session/replicas/remote.py) says so on a shared channel of the
broker, `watch <session> <replica>` on `WATCH_CHANNEL`: when its watch starts, every
`interval` (W) while it lasts, and whenever an owner asks (`who <session>` — or `who`, all
sessions — on `WHO_CHANNEL`). An owner hearing it publishes the session's transient events
until 2W after the last announcement (one may be lost); it asks `who <session>` when it
takes a session (start, restart, takeover: it learns about watchers already there at
once), and `who` when its own subscription may have missed announcements (a broker
reconnect) — so a watched session is never left unpublished for longer than the time an
announcement takes to arrive, W at worst (an announcement and the question both lost).

What a watcher misses meanwhile — the first chunks of a message before the owner heard it
— is what live.py already copes with: a client that missed a message's start gets its text
whole with the final event (the hub's missed-start rule), once, never twice.

`LIVE_ON_DEMAND = False`: the general path — every transient event to the broker, watched or
not (announcements still go out and are heard; nothing depends on them then).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from agentd.session.replicas.stopping import cancel_and_wait

if TYPE_CHECKING:
    from agentd.store import Broker, Subscription

log = logging.getLogger(__name__)

LIVE_ON_DEMAND = True  # False: the owner publishes every transient event (the old path)
WATCH_CHANNEL = "live-watch"  # watchers → owners: "watch <session> <replica>"
WHO_CHANNEL = "live-who"  # owners → watchers: "who <session>", or "who" (every session)
WATCH_INTERVAL_S = 10.0  # W: a watcher re-announces this often; an owner believes it for 2W
PRUNE_AT = 1_024  # watched sessions remembered before the expired ones are dropped


def watch_message(session_id: str, replica_id: str) -> bytes:
    return f"watch {session_id} {replica_id}".encode()


def who_message(session_id: str | None) -> bytes:
    return b"who" if session_id is None else f"who {session_id}".encode()


def watched_session(data: bytes) -> str | None:
    """The session a `watch` announcement names (its replica id has no space); None for
    anything else (anyone may publish on the channel)."""
    text = data.decode(errors="replace")
    if not text.startswith("watch "):
        return None
    session_id, sep, replica = text[6:].rpartition(" ")
    return session_id if sep and session_id and replica else None


def asked_session(data: bytes) -> str | None:
    """A `who` question's session ("": every session); None for anything else."""
    if data == b"who":
        return ""
    if data.startswith(b"who ") and len(data) > 4:
        return data[4:].decode(errors="replace")
    return None


class Watched:
    """The owner's side: until when each session is watched elsewhere (monotonic time)."""

    def __init__(
        self, interval_s: float = WATCH_INTERVAL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._until: dict[str, float] = {}
        self.heard = 0  # announcements heard

    def __call__(self, session_id: str) -> bool:
        """Whether the session's transient events go to the broker now."""
        if not LIVE_ON_DEMAND:
            return True
        until = self._until.get(session_id)
        return until is not None and until > self._clock()

    def announced(self, session_id: str) -> None:
        self.heard += 1
        self.keep(session_id)

    def keep(self, session_id: str) -> None:
        """Watched for 2W from now (announced — or a command routed here from a replica
        whose client follows the session: it is watched there, whether or not its
        announcement has arrived yet)."""
        now = self._clock()
        until = self._until
        until[session_id] = now + 2 * self.interval_s
        if len(until) > PRUNE_AT:  # (amortised: at most once per PRUNE_AT announcements)
            for sid in [sid for sid, t in until.items() if t <= now]:
                del until[sid]

    def __len__(self) -> int:
        """Sessions watched now."""
        now = self._clock()
        return sum(1 for t in self._until.values() if t > now)

    def received(self, item: bytes | object) -> bool:
        """One item of the subscription to `WATCH_CHANNEL`: True when it was a gap (the
        caller asks `who` again)."""
        if not isinstance(item, bytes):
            return True  # a Gap: announcements may have gone by
        session_id = watched_session(item)
        if session_id is not None:
            self.announced(session_id)
        return False


class WatchAnnouncer:
    """The watcher's side, one per process: announces each session `sessions()` names when
    its watch starts (`announce`), every `interval_s` while it lasts, and when an owner asks.
    `send(channel, data)` queues a message for the broker (the live publisher's outbox)."""

    def __init__(
        self,
        broker: Broker,
        replica_id: str,
        sessions: Callable[[], Iterable[str]],
        send: Callable[[str, bytes], None],
        *,
        interval_s: float = WATCH_INTERVAL_S,
    ) -> None:
        self._broker = broker
        self._replica_id = replica_id
        self._sessions = sessions
        self._send = send
        self.interval_s = interval_s
        self.announced = 0
        self._tasks: list[asyncio.Task[None]] = []

    def announce(self, session_id: str) -> None:
        self.announced += 1
        self._send(WATCH_CHANNEL, watch_message(session_id, self._replica_id))

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._every_interval(), name="live-watch-announce"),
            asyncio.create_task(self._answer(), name="live-watch-who"),
        ]

    async def _every_interval(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            for session_id in list(self._sessions()):
                self.announce(session_id)

    async def _answer(self) -> None:
        subscription = await subscribe(self._broker, WHO_CHANNEL)
        try:
            async for item in subscription:
                asked = asked_session(item) if isinstance(item, bytes) else None
                if asked is None:
                    continue  # (a gap: what was asked meanwhile is answered by the next round)
                watched = set(self._sessions())
                for session_id in watched if asked == "" else ({asked} & watched):
                    self.announce(session_id)
        finally:
            with contextlib.suppress(Exception):
                await subscription.aclose()

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks = []


async def subscribe(broker: Broker, channel: str) -> Subscription:
    """A subscription to `channel`, tried again until the broker answers (the broker may be
    down at start-up: live text waits for it, nothing else does)."""
    delay = 0.5
    while True:
        try:
            return await broker.subscribe(channel)
        except Exception as exc:
            log.warning("no subscription to %s on the broker yet (%s)", channel, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)


__all__ = [
    "LIVE_ON_DEMAND",
    "WATCH_CHANNEL",
    "WHO_CHANNEL",
    "WatchAnnouncer",
    "Watched",
    "asked_session",
    "watch_message",
    "watched_session",
    "who_message",
]
