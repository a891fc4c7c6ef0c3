"""Postgres LISTEN/NOTIFY for replicas (R-C1, issue 15): one listening connection per
process, wake-ups only.

A notification says "session S has events up to seq N" (or, on other channels, "look at
the routing table"); it never carries the data, which is read from the log. NOTIFY is not
durable: a notification sent while the listener was disconnected is lost, so after every
(re)connect `on_connect` runs and the consumers catch up from the store by themselves.
Payloads are parsed defensively — anything on the channel may have been sent by hand.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from sqlalchemy.engine import make_url

log = logging.getLogger(__name__)

EVENTS_CHANNEL = "agentd_events"
# "who may see session S changed" — its shares, or it was deleted (the payload is the
# session id): replicas watching it for their clients re-check those clients' access (R-X2
# across replicas) and detach them all when it is gone.
SHARES_CHANNEL = "agentd_shares"
# "orphans are being claimed" (the payload is the claiming replica's id): a sweep whose claim
# came back full wakes the other replicas' sweeps, so the survivors of a dead replica share
# its sessions instead of whichever swept first taking them all (issue 26 item 6).
TAKEOVER_CHANNEL = "agentd_takeover"
MAX_SESSION_ID = 200  # longer ids are not ours: ignored
LISTEN_APPLICATION_NAME = "agentd-listen"


def events_payload(session_id: str, seq: int) -> str:
    return f"{seq} {session_id}"


def parse_events_payload(payload: str) -> tuple[str, int] | None:
    """(session id, seq) of an events notification, or None for anything malformed."""
    seq_text, _, session_id = payload.partition(" ")
    if not session_id or len(session_id) > MAX_SESSION_ID or not seq_text.isdigit():
        return None
    return session_id, int(seq_text)


def asyncpg_dsn(database_url: str) -> str:
    """The libpq form of a SQLAlchemy `postgresql+asyncpg://` URL."""
    url = make_url(database_url)
    if url.get_backend_name() != "postgresql":
        raise ValueError("LISTEN/NOTIFY needs a Postgres database")
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


class PgListener:
    """Keeps one connection LISTENing on `handlers`' channels; reconnects with backoff.

    Handlers run on the event loop and must not block (they wake tasks up). `on_connect`
    runs after each successful LISTEN — the first one included, retried until it succeeds —
    so consumers re-read what they may have missed."""

    def __init__(
        self,
        database_url: str,
        handlers: Mapping[str, Callable[[str], None]],
        *,
        on_connect: Callable[[], Awaitable[None]] | None = None,
        connect_timeout_s: float = 10.0,
        backoff_max_s: float = 5.0,
        ping_interval_s: float = 5.0,
        ping_timeout_s: float = 5.0,
    ) -> None:
        self._dsn = asyncpg_dsn(database_url)
        self._handlers = dict(handlers)
        self._on_connect = on_connect
        self._connect_timeout = connect_timeout_s
        self._backoff_max = backoff_max_s
        self._ping_interval = ping_interval_s
        self._ping_timeout = ping_timeout_s
        self.connected = asyncio.Event()
        self.connects = 0  # successful LISTENs so far (a metric, and for tests)
        # The live connection and the callbacks listening on it (channels come and go:
        # `listen` / `unlisten`, e.g. the broker's per-session channels).
        self._conn: Any = None
        self._listening: dict[str, Callable[[Any, int, str, str], None]] = {}
        self._changing = asyncio.Lock()  # one LISTEN/UNLISTEN at a time on the connection

    async def listen(self, channel: str, handler: Callable[[str], None]) -> None:
        """Also LISTEN on `channel` from now on (and after every reconnect)."""
        self._handlers[channel] = handler
        async with self._changing:
            conn = self._conn
            if conn is not None and channel not in self._listening:
                callback = _dispatch(channel, handler)
                self._listening[channel] = callback
                try:
                    await conn.add_listener(channel, callback)
                except Exception as exc:  # the connection is going: the reconnect listens
                    log.info("LISTEN %s failed (%s); the next connection will", channel, exc)

    async def unlisten(self, channel: str) -> None:
        self._handlers.pop(channel, None)
        async with self._changing:
            callback = self._listening.pop(channel, None)
            conn = self._conn
            if conn is not None and callback is not None:
                with contextlib.suppress(Exception):
                    await conn.remove_listener(channel, callback)

    async def run(self) -> None:
        """Listen until cancelled."""
        delay = 0.1
        while True:
            lost = asyncio.Event()
            try:
                conn = await self._connect(lost)
            except (OSError, TimeoutError, Exception) as exc:  # asyncpg raises many kinds
                log.warning("LISTEN connection failed (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._backoff_max)
                continue
            delay = 0.1
            try:
                self.connects += 1
                self.connected.set()
                await self._caught_up(lost)
                await self._watch(conn, lost)
                log.warning("LISTEN connection lost; reconnecting")
            finally:
                self.connected.clear()
                self._conn = None
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(conn.close(), 2)

    async def _caught_up(self, lost: asyncio.Event) -> None:
        """Run `on_connect` until it succeeds (or the connection is lost again): the
        consumers' catch-up reads the store, which may still be failing right after a reset
        (its pooled connections were cut too) — a failed catch-up must neither end the
        listener nor be skipped, or what was announced meanwhile stays unseen for good."""
        delay = 0.1
        while self._on_connect is not None and not lost.is_set():
            try:
                await self._on_connect()
                return
            except Exception as exc:
                log.warning("catching up after LISTEN connected failed (%s); retrying in %.1fs", exc, delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lost.wait(), delay)
            delay = min(delay * 2, self._backoff_max)

    async def _watch(self, conn: Any, lost: asyncio.Event) -> None:
        """Until the connection is lost. A connection that dies without a word (a network
        partition, a NAT or proxy dropping it) never reports its end: a query every
        `ping_interval_s` with a deadline finds it out, so a silent listener is replaced."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lost.wait(), self._ping_interval)
            if lost.is_set():
                return
            try:
                await asyncio.wait_for(conn.fetchval("SELECT 1"), self._ping_timeout)
            except Exception as exc:
                log.warning("the LISTEN connection does not answer (%s)", exc or type(exc).__name__)
                conn.terminate()
                return

    async def _connect(self, lost: asyncio.Event) -> Any:
        import asyncpg  # type: ignore[import-untyped]

        conn = await asyncpg.connect(
            self._dsn,
            timeout=self._connect_timeout,
            server_settings={"application_name": LISTEN_APPLICATION_NAME},  # findable in pg_stat_activity
        )
        try:
            conn.add_termination_listener(lambda _conn: lost.set())
            self._listening = {}
            for channel, handler in list(self._handlers.items()):
                callback = self._listening[channel] = _dispatch(channel, handler)
                await conn.add_listener(channel, callback)
            await self._listen_added(conn)
        except BaseException:
            self._conn = None
            conn.terminate()
            raise
        return conn

    async def _listen_added(self, conn: Any) -> None:
        """LISTEN on channels `listen` added while the connection was being set up."""
        async with self._changing:
            self._conn = conn
            while missing := [c for c in self._handlers if c not in self._listening]:
                for channel in missing:
                    callback = self._listening[channel] = _dispatch(channel, self._handlers[channel])
                    await conn.add_listener(channel, callback)


def _dispatch(channel: str, handler: Callable[[str], None]) -> Callable[[Any, int, str, str], None]:
    def on_notification(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
        try:
            handler(payload)
        except Exception:  # one bad payload or consumer must not stop the listener
            log.exception("handling a notification on %s failed", channel)

    return on_notification
