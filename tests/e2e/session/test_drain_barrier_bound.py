"""The drain barrier is bounded and cancellable (issue 16 item 9, R-L3h).

Seed 000 §4.6: "流排空屏障：采样成功后等待最多 5 秒让事件流排空再继续…宁可付 5 秒的尾延迟也不
让乱序事件泄漏出去，超时则告警放行" — wait at most 5 s for the event stream to drain, then
warn and go on. And the user's cancel must get through a barrier that is still waiting.

The event log is really stalled: the test holds SQLite's write lock from its own
connection, so no commit (and no delivery to the hubs) can happen until it lets go.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agentd.infra.config import PermissionMode
from tests.support.client import text_prompt
from tests.support.polling import until
from tests.support.server import scripted
from tests.support.session import served_session

WRITE = {"name": "write_file", "arguments": {"path": "out.txt", "content": "written"}, "id": "call_w"}
# A command, not write_file: write_file first commits a snapshot (R-T12), which the stalled
# store would hold up, and the barrier's bound is what this test is about.
BASH = {"name": "bash", "arguments": {"command": "printf written > out.txt"}, "id": "call_w"}


@contextmanager
def write_lock(db: Path) -> Iterator[sqlite3.Connection]:
    """Hold the database's write lock (WAL: readers go on, every writer waits)."""
    conn = sqlite3.connect(db, timeout=30, isolation_level=None)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        yield conn
    finally:
        conn.rollback()
        conn.close()


class FlushSpy:
    """Counts the turn's waits for its events to reach the hubs (`journal.flushed`)."""

    def __init__(self, journal: Any) -> None:
        self.calls = 0
        self._flushed: Callable[[], Awaitable[None]] = journal.flushed
        journal.flushed = self

    async def __call__(self) -> None:
        self.calls += 1
        await self._flushed()


async def test_a_stalled_event_log_delays_the_tools_at_most_the_bound_then_warns(
    server_factory, workspace: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Seed 000: "等待最多 5 秒…超时则告警放行" — (the bound shortened to 0.2 s here). Today the
    barrier has no bound: the tool never runs while the log is stalled."""
    caplog.set_level(logging.WARNING, logger="agentd.loop.drain")
    provider = scripted({"text": "Writing it.", "tool_calls": [BASH]}, {"text": "Done."})
    limits = {"drain": {"timeout_s": 0.2}}
    async with served_session(
        server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS, limits=limits
    ) as (_, client, sid):
        with write_lock(tmp_path / "home" / "agentd.db"):
            prompt = asyncio.create_task(client.call("session/prompt", text_prompt(sid, "write it")))
            # The tool ran although nothing of this turn could be committed yet.
            await until(lambda: (workspace / "out.txt").exists(), what="the tool to run past the barrier")
            assert not prompt.done()  # the answer still waits for its events to be committed
        result = await prompt
        assert result["stopReason"] == "end_turn"
        assert (workspace / "out.txt").read_text() == "written"
        assert any("drain barrier" in r.getMessage() for r in caplog.records)


async def test_a_cancel_gets_through_a_waiting_drain_barrier(
    server_factory, workspace: Path, tmp_path: Path
) -> None:
    """Seed 000: the barrier waits "最多 5 秒"; a user cancel must not wait behind it. Today the
    barrier ignores the cancel, and once the log un-stalls the step's write still runs."""
    provider = scripted({"text": "Writing it.", "tool_calls": [WRITE]}, {"text": "Done."})
    limits = {"drain": {"timeout_s": 120}}  # far beyond the test: only the cancel can end the wait
    async with served_session(
        server_factory, workspace, provider, permission_mode=PermissionMode.BYPASS, limits=limits
    ) as (server, client, sid):
        actor = server.app.state.agentd.manager.live_actor(sid)
        spy = FlushSpy(actor.journal)
        with write_lock(tmp_path / "home" / "agentd.db"):
            prompt = asyncio.create_task(client.call("session/prompt", text_prompt(sid, "write it")))
            await until(lambda: spy.calls >= 1, what="the turn to reach the drain barrier")
            await client.notify("session/cancel", {"sessionId": sid})
            # The turn goes on to its end (its second wait: the answer after its events).
            await until(lambda: spy.calls >= 2, what="the cancel to end the barrier's wait")
            assert not (workspace / "out.txt").exists()
        result = await prompt
        assert result["stopReason"] == "cancelled"
        assert not (workspace / "out.txt").exists()
        finished = [u for u in client.updates(sid) if u.get("toolCallId") == "call_w" and "status" in u]
        assert finished[-1]["status"] == "failed"
        assert len(provider.requests) == 1
