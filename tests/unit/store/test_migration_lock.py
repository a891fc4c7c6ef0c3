"""Start-up never waits unboundedly on another replica (issue 26 item 6): the migration
lock is taken with a deadline; while it waits a log line names the lock's holder, and past
the deadline the error does — then, the lock free, the same migration goes through."""

from __future__ import annotations

import logging

import asyncpg
import pytest

from agentd.store.db import Store
from agentd.store.engine import SCHEMA_HEAD
from agentd.store.migration_lock import MIGRATION_LOCK_KEY, MigrationLockTimeout
from tests.support.databases import postgres_database

pytestmark = pytest.mark.postgres


async def test_a_held_migration_lock_times_out_naming_its_holder_then_migrates_once_free(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with postgres_database() as url:  # empty: the schema is behind, a migration is due
        holder = await asyncpg.connect(
            url.replace("postgresql+asyncpg://", "postgresql://"),
            server_settings={"application_name": "stuck-tool"},
        )
        store = await Store.open(url)
        try:
            await holder.execute(f"SELECT pg_advisory_lock({MIGRATION_LOCK_KEY})")
            pid = holder.get_server_pid()
            with caplog.at_level(logging.WARNING, logger="agentd.store.migration_lock"):
                with pytest.raises(MigrationLockTimeout) as raised:
                    await store.migrate(lock_timeout_s=0.5)
            message = str(raised.value)
            assert f"backend pid {pid} (stuck-tool)" in message and "0.5s" in message
            waiting = [r.getMessage() for r in caplog.records if "waiting up to" in r.getMessage()]
            assert waiting and f"backend pid {pid} (stuck-tool)" in waiting[0]
            assert (await store.migration_status())[0] is None  # nothing half-done

            await holder.execute(f"SELECT pg_advisory_unlock({MIGRATION_LOCK_KEY})")
            await store.migrate(lock_timeout_s=5)
            assert (await store.migration_status())[0] == SCHEMA_HEAD
        finally:
            await holder.close()
            await store.close()
