"""The machine's Redis for the tests that need one (the broker of issue 26). Redis is shared
with other test runs: a test uses channels no other test uses (pub/sub channels are global,
whatever the database number) and kills only its own clients, found by their name."""

from __future__ import annotations

import os
import uuid

import pytest
import redis.asyncio as aioredis

REDIS_BASE = os.environ.get("AGENTD_TEST_REDIS_URL", "redis://127.0.0.1:6379")


async def redis_url(db: int = 0) -> str:
    """The Redis URL (database `db`); skips the test when Redis is not reachable (fails in CI)."""
    client = aioredis.Redis.from_url(REDIS_BASE, socket_connect_timeout=3)
    try:
        await client.ping()
    except (aioredis.RedisError, OSError):
        if os.environ.get("CI"):
            pytest.fail(f"Redis not reachable at {REDIS_BASE} (required in CI)")
        pytest.skip("Redis not reachable")
    finally:
        await client.aclose()
    return f"{REDIS_BASE}/{db}"


def unique(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


async def kill_clients(name: str) -> int:
    """Drop every connection of clients named `name` (ours: a broker started with that
    name); returns how many."""
    client = aioredis.Redis.from_url(REDIS_BASE)
    try:
        found = [c for c in await client.client_list() if c.get("name") == name]
        for c in found:
            await client.client_kill_filter(_id=c["id"])
        return len(found)
    finally:
        await client.aclose()


async def subscribed_clients(name: str) -> list[str]:
    """The ids of the connections of clients named `name` subscribed to some channel."""
    client = aioredis.Redis.from_url(REDIS_BASE)
    try:
        return [
            c["id"] for c in await client.client_list() if c.get("name") == name and int(c.get("sub", 0)) > 0
        ]
    finally:
        await client.aclose()
