"""Watching a session owned by another replica (R-C1, issue 15 item 2, groundwork): a
`LogTail` publishes the log's events after its cursor, woken by Postgres NOTIFY through
one `PgListener` — each event once, in order, whatever the notifications do (coalesced,
repeated, out of order, malformed, or lost while the listener was disconnected)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator

import asyncpg
import pytest

from agentd.core.events import Event
from agentd.session.replicas.log_tail import LogTail, LogTails
from agentd.store.db import Batch, Store
from agentd.store.notify import (
    EVENTS_CHANNEL,
    LISTEN_APPLICATION_NAME,
    PgListener,
    asyncpg_dsn,
    events_payload,
    parse_events_payload,
)
from tests.support.databases import event_write, postgres_database
from tests.support.polling import until

pytestmark = pytest.mark.timeout(60)
SID = "s-watched"


async def _open(url: str) -> Store:
    store = await Store.open(url)
    await store.migrate()
    await store.create_session(id=SID, owner="o", cwd="/w", mode="default", model="m")
    return store


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    async with postgres_database(migrated=True) as url:
        yield url


async def _append(store: Store, first: int, last: int) -> None:
    events = [
        event_write(seq, "agent_message", {"messageId": f"m{seq}", "text": str(seq)})
        for seq in range(first, last + 1)
    ]
    await store.commit([Batch(SID, events=events)])


def test_payloads_are_parsed_defensively() -> None:
    assert parse_events_payload(events_payload("sess 1", 42)) == ("sess 1", 42)
    for bad in ["", "x y", "12", "-1 s", "1.5 s", "12 " + "s" * 201]:
        assert parse_events_payload(bad) is None, bad


async def test_a_tail_publishes_each_event_once_in_order_on_both_databases(migrated_db_url: str) -> None:
    store = await _open(migrated_db_url)
    try:
        got: list[Event] = []
        tail = LogTail(store, SID, got.append, after_seq=0, page_size=3)  # pages of 3: 7 events = 3 reads
        await _append(store, 1, 7)
        await tail.catch_up()
        assert [e.seq for e in got] == list(range(1, 8)) and tail.cursor == 7
        assert got[0].payload["text"] == "1" and got[0].session_id == SID
        await tail.catch_up()  # nothing new: nothing published again
        assert len(got) == 7
        resumed: list[Event] = []
        await LogTail(store, SID, resumed.append, after_seq=5).catch_up()  # a client's last seq
        assert [e.seq for e in resumed] == [6, 7]
    finally:
        await store.close()


async def test_notify_wakes_the_tail_and_reconnects_catch_up(pg_url: str) -> None:
    store = await _open(pg_url)
    got: list[Event] = []
    tails = LogTails()
    tail = LogTail(store, SID, got.append, after_seq=0)
    tails.add(tail)
    listener = PgListener(pg_url, {EVENTS_CHANNEL: tails.on_notification}, on_connect=tails.on_connect)
    notifier = await asyncpg.connect(asyncpg_dsn(pg_url))

    async def notify(payload: str) -> None:
        await notifier.execute("SELECT pg_notify($1, $2)", EVENTS_CHANNEL, payload)

    try:
        async with asyncio.TaskGroup() as tg:
            runs = [tg.create_task(listener.run()), tg.create_task(tail.run())]
            await until(lambda: listener.connected.is_set(), what="LISTEN")

            await _append(store, 1, 3)
            await notify(events_payload(SID, 3))
            await until(lambda: [e.seq for e in got] == [1, 2, 3], what="events 1-3")

            # Junk, repeats and stale seqs on the channel: nothing published twice.
            await _append(store, 4, 5)
            for payload in [
                "garbage",
                events_payload("other-session", 9),
                events_payload(SID, 2),
                events_payload(SID, 5),
                events_payload(SID, 5),
            ]:
                await notify(payload)
            await until(lambda: [e.seq for e in got] == [1, 2, 3, 4, 5], what="events 4-5")

            # The listener's connection dies; events committed meanwhile (their NOTIFY lost)
            # arrive once it is back.
            pid = await notifier.fetchval(
                "SELECT pid FROM pg_stat_activity "
                "WHERE application_name = $1 AND datname = current_database()",
                LISTEN_APPLICATION_NAME,
            )
            assert pid is not None
            await notifier.execute("SELECT pg_terminate_backend($1)", pid)
            await _append(store, 6, 8)
            await until(lambda: listener.connects >= 2, what="the listener reconnected")
            await until(
                lambda: [e.seq for e in got] == list(range(1, 9)), what="events 6-8 after the reconnect"
            )
            for run in runs:
                run.cancel()
    finally:
        await notifier.close()
        await store.close()


async def test_a_failing_catch_up_is_retried_and_the_listener_goes_on(pg_url: str) -> None:
    """Issue 26 item 2: right after a reset the consumers' catch-up (reading the store) can
    fail too; that must neither end the listener nor be skipped."""
    got: list[str] = []
    calls: list[bool] = []

    async def on_connect() -> None:
        calls.append(True)
        if len(calls) <= 2:
            raise ConnectionError("connection was closed in the middle of operation")

    listener = PgListener(pg_url, {EVENTS_CHANNEL: got.append}, on_connect=on_connect)
    notifier = await asyncpg.connect(asyncpg_dsn(pg_url))
    task = asyncio.create_task(listener.run())
    try:
        await until(lambda: len(calls) == 3, what="the catch-up retried until it succeeded")
        await notifier.execute("SELECT pg_notify($1, $2)", EVENTS_CHANNEL, events_payload(SID, 1))
        await until(lambda: got == [events_payload(SID, 1)], what="notifications still delivered")
        assert listener.connects == 1 and not task.done()
    finally:
        task.cancel()
        await notifier.close()


async def test_a_listen_connection_that_stops_answering_is_replaced(pg_url: str) -> None:
    """A connection that dies without a word (a partition) is found by the ping."""
    listener = PgListener(pg_url, {EVENTS_CHANNEL: lambda _p: None}, ping_interval_s=0.1, ping_timeout_s=0.2)
    observer = await asyncpg.connect(asyncpg_dsn(pg_url))
    task = asyncio.create_task(listener.run())
    find = "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()"
    try:
        await until(lambda: listener.connected.is_set(), what="LISTEN")
        (pid,) = [r["pid"] for r in await observer.fetch(find, LISTEN_APPLICATION_NAME)]
        # Its backend (of this test's own database) stops: the socket stays open, nothing answers.
        os.kill(pid, signal.SIGSTOP)
        try:
            await until(lambda: listener.connects >= 2, what="a new connection after the silent one")
        finally:
            os.kill(pid, signal.SIGCONT)

        async def old_backend_gone() -> bool:  # (once resumed, it finds its client gone and exits)
            return pid not in [r["pid"] for r in await observer.fetch(find, LISTEN_APPLICATION_NAME)]

        await until(old_backend_gone, what="the silent connection's backend gone")
    finally:
        task.cancel()
        await observer.close()
