"""The live-message broker (issue 26): Redis pub/sub and Postgres NOTIFY behind one interface,
against the machine's real Redis and Postgres — messages in order to every subscriber of a
channel and to nobody else, a message larger than a NOTIFY payload put together again, and
the fault that loses messages (the broker's connection killed) announced as a `Gap` before
messages flow again."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg
import pytest

from agentd.store.broker import (
    PG_PAYLOAD_LIMIT,
    Broker,
    Gap,
    PgAssembler,
    PgBroker,
    Subscription,
    pg_channel,
    pg_fragments,
)
from agentd.store.notify import PgListener, asyncpg_dsn
from agentd.store.redis_broker import RedisBroker
from tests.support.databases import postgres_database
from tests.support.polling import until
from tests.support.redis import kill_clients, redis_url, unique

# -- pure: fragments of a NOTIFY payload ------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b"short",
        b"",
        "é€😀 mixed width ".encode() * 2_000,  # a cut never falls inside a character
        b"x" * 50_000,
        b"\x00\xff binary" * 3_000,  # not text: base64
    ],
)
def test_fragments_fit_a_payload_and_assemble_to_the_message(data: bytes) -> None:
    parts = pg_fragments("id1", data)
    assert all(len(p.encode()) < PG_PAYLOAD_LIMIT for p in parts)
    assembler = PgAssembler()
    out = [assembler.feed(p) for p in parts]
    assert out[:-1] == [None] * (len(parts) - 1)
    assert out[-1] == data


def test_a_message_missing_a_fragment_or_not_ours_is_dropped() -> None:
    parts = pg_fragments("m", b"y" * 20_000)
    assert len(parts) == 3
    assembler = PgAssembler()
    assert [assembler.feed(p) for p in (parts[0], parts[2])] == [None, None]
    assert assembler.feed(parts[1]) is None  # its start went by: never half a message
    for foreign in ("", "hello", "t1:x:1:", "q1:0:1:data", "b1:0:1:!!notbase64"):
        assert assembler.feed(foreign) is None
    assert assembler.feed(pg_fragments("n", b"ok")[0]) == b"ok"


def test_pg_channel_is_a_short_identifier() -> None:
    name = pg_channel("live:" + "S" * 500)
    assert len(name) < 63 and name == name.lower() and name.isidentifier()
    assert pg_channel("live:a") != pg_channel("live:b")


async def test_a_subscriber_that_falls_behind_gets_an_overflow_gap() -> None:
    async def closed(_: Subscription) -> None:
        pass

    sub = Subscription("c", closed, limit=3)
    for i in range(5):
        sub.put(b"%d" % i)
    assert [await anext(sub), await anext(sub)] == [Gap.OVERFLOWED, b"4"]  # then the newest
    await sub.aclose()
    with pytest.raises(StopAsyncIteration):
        await anext(sub)


# -- both brokers, real servers ----------------------------------------------------------


@contextlib.asynccontextmanager
async def redis_broker() -> AsyncIterator[tuple[RedisBroker, str]]:
    name = unique("agentd-test-broker")
    broker = RedisBroker(await redis_url(), client_name=name)
    broker.start()
    try:
        await asyncio.wait_for(broker.connected.wait(), 10)
        yield broker, name
    finally:
        await broker.close()


@contextlib.asynccontextmanager
async def pg_broker() -> AsyncIterator[tuple[PgBroker, PgListener, str]]:
    async with postgres_database() as url:
        broker: PgBroker | None = None

        async def reconnected() -> None:
            assert broker is not None
            await broker.reconnected()

        listener = PgListener(url, {}, on_connect=reconnected)
        broker = PgBroker(url, listener)
        task = asyncio.create_task(listener.run())
        try:
            await asyncio.wait_for(listener.connected.wait(), 10)
            yield broker, listener, url
        finally:
            await broker.close()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


@contextlib.asynccontextmanager
async def any_broker(kind: str) -> AsyncIterator[Broker]:
    if kind == "redis":
        async with redis_broker() as (rb, _):
            yield rb
    else:
        async with pg_broker() as (pb, _, _):
            yield pb


async def received(sub: Subscription, n: int) -> list[bytes | Gap]:
    return [await asyncio.wait_for(anext(sub), 10) for _ in range(n)]


@pytest.mark.parametrize("kind", ["redis", "notify"])
async def test_messages_reach_every_subscriber_of_their_channel_in_order(kind: str) -> None:
    async with any_broker(kind) as broker:
        one, other = unique("live"), unique("live")
        first = await broker.subscribe(one)
        second = await broker.subscribe(one)
        elsewhere = await broker.subscribe(other)
        big = "ü".encode() * 9_000  # 18 KB: more than one NOTIFY payload
        # Quotes, backslashes and control characters: escaped on the way (NOTIFY's batch goes
        # as one json parameter) and the very bytes again on arrival.
        odd = '{"t":"\\"q\\" \\\\ \n\t\x1f \u2028 é"}'.encode()
        await broker.publish_many([(one, b"a"), (other, b"x"), (one, big), (one, b"\x00c"), (one, odd)])
        await broker.publish(one, b"d")
        for sub in (first, second):
            assert await received(sub, 5) == [b"a", big, b"\x00c", odd, b"d"]
        assert await received(elsewhere, 1) == [b"x"]
        # Unsubscribed: nothing more arrives there; the others still get theirs.
        await first.aclose()
        await broker.publish_many([(one, b"e"), (other, b"y")])
        assert await received(second, 1) == [b"e"]
        assert await received(elsewhere, 1) == [b"y"]
        assert not first._items


async def test_redis_connection_killed_is_a_gap_then_messages_flow_again() -> None:
    async with redis_broker() as (broker, name):
        channel = unique("live")
        sub = await broker.subscribe(channel)
        await broker.publish(channel, b"before")
        assert await received(sub, 1) == [b"before"]
        assert await kill_clients(name) >= 1  # our connections only
        assert await received(sub, 1) == [Gap.RECONNECTED]
        await broker.publish(channel, b"after")  # the publishing pool reconnects by itself
        assert await received(sub, 1) == [b"after"]
        assert broker.connects == 2


async def test_redis_unreachable_fails_the_publish_and_keeps_retrying() -> None:
    from tests.support.proc import free_port

    broker = RedisBroker(f"redis://127.0.0.1:{free_port()}/0")
    broker.start()
    try:
        with pytest.raises(Exception, match=r"(?i)connect"):
            await broker.publish("c", b"x")
        sub = await broker.subscribe("c")  # accepted: subscribed once a connection exists
        assert not broker.connected.is_set()
        await sub.aclose()
    finally:
        await broker.close()


async def test_notify_listener_killed_is_a_gap_then_messages_flow_again() -> None:
    async with pg_broker() as (broker, listener, url):
        channel = unique("live")
        sub = await broker.subscribe(channel)
        await broker.publish(channel, b"before")
        assert await received(sub, 1) == [b"before"]
        admin = await asyncpg.connect(asyncpg_dsn(url))
        try:  # every other backend of this test's own database: the listener and the publisher
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        finally:
            await admin.close()
        assert await received(sub, 1) == [Gap.RECONNECTED]
        await until(lambda: listener.connects == 2, what="the listener back")
        # The publisher's connection died too: one publish may fail (transient), then it reconnects.
        with contextlib.suppress(Exception):
            await broker.publish(channel, b"lost?")
        await broker.publish(channel, b"after")
        got = await received(sub, 1)
        if got == [b"lost?"]:
            got = await received(sub, 1)
        assert got == [b"after"]


async def test_notify_subscriptions_made_at_once_all_listen_and_closed_ones_stop() -> None:
    """Many channels subscribed concurrently (one LISTEN at a time on the one connection)."""
    async with pg_broker() as (broker, listener, _):
        channels = [unique("live") for _ in range(20)]
        subs = await asyncio.gather(*(broker.subscribe(c) for c in channels))
        await broker.publish_many([(c, c.encode()) for c in channels])
        assert [await received(s, 1) for s in subs] == [[c.encode()] for c in channels]
        await asyncio.gather(*(s.aclose() for s in subs[:10]))
        assert sorted(listener._listening) == sorted(pg_channel(c) for c in channels[10:])


async def test_redis_subscriptions_made_before_the_connection_are_subscribed_on_connect() -> None:
    broker = RedisBroker(await redis_url(), client_name=unique("agentd-test-broker"))
    try:
        channels = [unique("live") for _ in range(3)]
        subs = [await broker.subscribe(c) for c in channels]  # not started: nothing waits on a connect
        broker.start()
        await asyncio.wait_for(broker.connected.wait(), 10)
        await broker.publish_many([(c, b"hi " + c.encode()) for c in channels])
        assert [await received(s, 1) for s in subs] == [[b"hi " + c.encode()] for c in channels]
    finally:
        await broker.close()
