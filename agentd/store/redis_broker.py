"""Redis pub/sub as the broker (issue 26), when `AGENTD_REDIS_URL` is set: one connection per
process reads every subscribed channel, another (a small pool) publishes, a batch as one
pipeline. Only live messages pass here — nothing Redis holds is needed to recover anything.

The `redis` package is imported when this module is: only when the setting asks for it (an
idle server's imports are pinned by tests/unit/test_startup_imports.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import ConnectionError, RedisError

from agentd.store.broker import Gap, Subscribers, Subscription

log = logging.getLogger(__name__)

PREFIX = "agentd:"  # every channel agentd uses on a Redis it may share
CONNECT_TIMEOUT_S = 5.0
READ_POLL_S = 1.0  # the reader wakes this often with nothing to read (to ping, to notice a close)
HEALTH_CHECK_S = 5.0  # a silent connection is PINGed after this (a dead peer is found out)
BACKOFF_MAX_S = 5.0


class RedisBroker:
    def __init__(self, url: str, *, client_name: str | None = None) -> None:
        options: dict[str, Any] = {
            "client_name": client_name,  # shown in CLIENT LIST (an operator, a test finds ours)
            "socket_connect_timeout": CONNECT_TIMEOUT_S,
            "socket_timeout": CONNECT_TIMEOUT_S,
        }
        # Publishing retries on a fresh connection (a pooled one may have died meanwhile).
        self._client: Any = aioredis.Redis.from_url(
            url,
            **options,
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 2),
            retry_on_error=[ConnectionError],
        )
        # Reading fails fast and reconnects here: a reconnect must be seen (it is a `Gap`).
        self._reading: Any = aioredis.Redis.from_url(
            url, **options, health_check_interval=HEALTH_CHECK_S, retry=Retry(NoBackoff(), 0)
        )
        self._subscribers = Subscribers()
        self._pubsub: Any = None  # the reading connection, while it is up
        self._subscribed: set[str] = set()  # its channels
        self._changing = asyncio.Lock()  # (re)subscribing: one at a time
        self._reader: asyncio.Task[None] | None = None
        self._closing = False  # redis-py may turn a cancellation into a connection error
        self.connected = asyncio.Event()
        self.connects = 0  # reading connections made so far (tests)

    def start(self) -> None:
        self._reader = asyncio.create_task(self._read(), name="redis-broker")

    async def publish(self, channel: str, data: bytes) -> None:
        await self._client.publish(PREFIX + channel, data)

    async def publish_many(self, messages: Sequence[tuple[str, bytes]]) -> None:
        if not messages:
            return
        async with self._client.pipeline(transaction=False) as pipe:
            for channel, data in messages:
                pipe.publish(PREFIX + channel, data)
            await pipe.execute()

    async def subscribe(self, channel: str) -> Subscription:
        sub = Subscription(channel, self._unsubscribe)
        # Not connected: the reader subscribes it once it is (nobody waits on a connect).
        if self._subscribers.add(sub) and self._pubsub is not None:
            async with self._changing:
                try:
                    await self._subscribe_missing()
                except (RedisError, OSError) as exc:  # the reader reconnects and subscribes
                    log.info("SUBSCRIBE %s failed (%s); the next connection will", channel, exc)
        return sub

    async def _subscribe_missing(self) -> None:
        """SUBSCRIBE the channels with subscribers that the connection is not subscribed to
        (under `_changing`)."""
        while self._pubsub is not None and (
            missing := [c for c in self._subscribers.by_channel if c not in self._subscribed]
        ):
            await self._pubsub.subscribe(*(PREFIX + c for c in missing))
            self._subscribed.update(missing)

    async def _unsubscribe(self, sub: Subscription) -> None:
        if self._subscribers.remove(sub) and self._pubsub is not None:
            async with self._changing:
                if self._pubsub is not None and sub.channel in self._subscribed:
                    self._subscribed.discard(sub.channel)
                    with contextlib.suppress(RedisError, OSError):
                        await self._pubsub.unsubscribe(PREFIX + sub.channel)

    async def _read(self) -> None:
        """Read every subscribed channel until cancelled; reconnect with backoff."""
        delay = 0.1
        while not self._closing:
            pubsub = self._reading.pubsub()
            try:
                await pubsub.ping()  # connects (PING is allowed before any SUBSCRIBE)
                async with self._changing:
                    self._pubsub, self._subscribed = pubsub, set()
                    await self._subscribe_missing()
                self.connects += 1
                self.connected.set()
                if self.connects > 1:
                    self._subscribers.gap(Gap.RECONNECTED)
                delay = 0.1
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=READ_POLL_S)
                    if message is not None and message.get("type") == "message":
                        channel = message["channel"]
                        name = channel.decode() if isinstance(channel, bytes) else str(channel)
                        self._subscribers.deliver(name.removeprefix(PREFIX), message["data"])
            except (RedisError, OSError, RuntimeError) as exc:
                if self.connected.is_set():
                    log.warning("Redis broker connection lost (%s); reconnecting", exc)
                else:  # once per outage, not per retry
                    level = logging.WARNING if delay == 0.1 else logging.DEBUG
                    log.log(
                        level,
                        "Redis broker unreachable (%s); retrying (backoff up to %.0fs)",
                        exc,
                        BACKOFF_MAX_S,
                    )
            finally:
                self.connected.clear()
                async with self._changing:
                    self._pubsub = None
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(pubsub.aclose(), 2)
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX_S)

    async def close(self) -> None:
        self._closing = True
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        for client in (self._client, self._reading):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.aclose(), 2)
