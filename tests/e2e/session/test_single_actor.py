"""One live actor per session, even when stopping it is slow (issue 9, item 2), and
bounded waits for the database (item 7).

A session being closed, deleted or evicted while its last events cannot commit (SQLite:
another process holds the write lock; Postgres: another connection locks the events
table) stops slowly. Meanwhile requests for it get a retryable -32019 `session_stopping`
instead of a second actor writing the same seqs; once the lock is gone the session
reloads from the store, its log has no gap, and nothing a client saw is missing. A batch
the database refuses for good fails its session loudly (no seq gap); an exhausted
connection pool answers a retryable -32019 `overloaded`.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from agentd.infra.overload import overload_error
from agentd.session.actor.session_actor import SessionActor
from agentd.store.db import Store
from tests.support.client import WsClient, text_prompt
from tests.support.polling import until
from tests.support.server import Server, scripted
from tests.support.session import new_session

BOUND_S = 30.0  # bounds a hang; never a timing assertion
STOPPING = -32019

# Holds the write lock of a SQLite database from another process until told to let go.
LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
conn.close()
print("released", flush=True)
"""


@asynccontextmanager
async def sqlite_write_lock(db: Path) -> AsyncIterator[Callable[[], Any]]:
    """Yields `release()` (a coroutine function); the lock is held until it is awaited."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        LOCKER,
        str(db),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout
    released = False

    async def release() -> None:
        nonlocal released
        if released:
            return
        released = True
        stdin.write(b"go\n")
        await stdin.drain()
        assert (await asyncio.wait_for(stdout.readline(), BOUND_S)).strip() == b"released"

    try:
        assert (await asyncio.wait_for(stdout.readline(), BOUND_S)).strip() == b"locked"
        yield release
        await release()
    finally:
        if proc.returncode is None and not released:
            proc.kill()
        await asyncio.wait_for(proc.wait(), BOUND_S)


@asynccontextmanager
async def database_write_lock(db_url: str) -> AsyncIterator[Callable[[], Any]]:
    """SQLite: the write lock, from another process. Postgres: an EXCLUSIVE lock on the
    events table (reads go on, every insert waits), from another connection."""
    if db_url.startswith("sqlite"):
        async with sqlite_write_lock(Path(db_url.split("///", 1)[1])) as release:
            yield release
        return
    conn = await asyncpg.connect(db_url.replace("postgresql+asyncpg://", "postgresql://"))
    tx = conn.transaction()
    await tx.start()
    await conn.execute("LOCK TABLE events IN EXCLUSIVE MODE")
    released = False

    async def release() -> None:
        nonlocal released
        if not released:
            released = True
            await tx.rollback()

    try:
        yield release
        await release()
    finally:
        await conn.close()


class Census:
    """Counts the actors whose task is running, per session (all of them, not only the
    ones the manager knows about)."""

    def __init__(self) -> None:
        self.running: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self.started: Counter[str] = Counter()


@pytest.fixture
def census(monkeypatch: pytest.MonkeyPatch) -> Census:
    c = Census()
    original = SessionActor._run

    async def counted(self: SessionActor) -> None:
        c.started[self.id] += 1
        c.running[self.id] += 1
        c.peak[self.id] = max(c.peak[self.id], c.running[self.id])
        try:
            await original(self)
        finally:
            c.running[self.id] -= 1

    monkeypatch.setattr(SessionActor, "_run", counted)
    return c


def _load_params(sid: str, workspace: Path) -> dict[str, Any]:
    return {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}


def _assert_stopping(response: dict[str, Any]) -> None:
    assert "error" in response, response
    error = response["error"]
    assert error["code"] == STOPPING, error
    assert error["data"]["reason"] == "session_stopping" and error["data"]["retryable"] is True


async def _until_ok(client: WsClient, method: str, params: dict[str, Any], attempts: int = 200) -> Any:
    """Retry while the answer is the retryable `session_stopping` (each attempt itself
    waits up to `session_stop_wait_s` for the old actor, so this is no busy loop)."""
    for _ in range(attempts):
        response = await client.request(method, params)
        if "error" not in response:
            return response["result"]
        _assert_stopping(response)
    raise AssertionError(f"{method} never succeeded")


def _seen_seqs(client: WsClient, sid: str) -> dict[int, str | None]:
    """seq → kind (for `_agentd/event`s) of every durable event the client was shown."""
    seen: dict[int, str | None] = {}
    for frame in client.frames:
        params = frame.get("params") if isinstance(frame, dict) else None
        if not isinstance(params, dict) or params.get("sessionId") != sid:
            continue
        meta = (params.get("_meta") or {}).get("agentd") or {}
        if "seq" in meta and not meta.get("transient"):
            seen.setdefault(meta["seq"], params.get("kind"))
    return seen


async def _assert_log_whole(store: Store, sid: str, *clients: WsClient) -> list[int]:
    events = await store.read_events(sid)
    seqs = [e.seq for e in events]
    assert seqs == list(range(1, len(seqs) + 1)), f"seq gap or duplicate: {seqs}"
    kinds = {e.seq: e.kind for e in events}
    for client in clients:
        for seq, kind in _seen_seqs(client, sid).items():
            assert seq in kinds, f"a client saw seq {seq}, which is not in the log"
            assert kind is None or kinds[seq] == kind
    return seqs


def _streaming() -> Any:
    return scripted(
        {"text": "x" * 600, "chunk_size": 2, "chunk_delay": 0.02},
        {"text": "after the reload"},
        loop=True,
    )


async def _start_streaming_turn(client: WsClient, sid: str) -> asyncio.Task[dict[str, Any]]:
    prompt = asyncio.create_task(client.request("session/prompt", text_prompt(sid, "talk")))
    await client.wait_notification(
        lambda m: (
            m["method"] == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        )
    )
    return prompt


@asynccontextmanager
async def _server(server_factory: Any, db_url: str, provider: Any = None) -> AsyncIterator[Server]:
    provider = provider or _streaming()
    async with server_factory(provider, database_url=db_url, session_stop_wait_s=0.3) as server:
        yield server


async def test_close_on_a_locked_database_never_starts_a_second_actor(
    server_factory: Any, workspace: Path, db_url: str, census: Census
) -> None:
    async with _server(server_factory, db_url) as server:
        store = server.app.state.agentd.store
        client, other = await server.client(), await server.client()
        sid = await new_session(client, workspace)
        prompt = await _start_streaming_turn(client, sid)
        async with database_write_lock(db_url) as release:
            # The cancelled turn's last events cannot commit: the actor cannot finish
            # stopping, and close says so instead of claiming success.
            _assert_stopping(await client.request("session/close", {"sessionId": sid}))
            # Another client's request waits for it, then is told to retry — no new actor.
            _assert_stopping(await other.request("session/load", _load_params(sid, workspace)))
            _assert_stopping(await other.request("session/prompt", text_prompt(sid, "now?")))
            assert census.running[sid] == 1
            await release()
            await _until_ok(other, "session/load", _load_params(sid, workspace))
        assert (await asyncio.wait_for(prompt, BOUND_S))["result"]["stopReason"] == "cancelled"
        result = await other.call("session/prompt", text_prompt(sid, "again"))
        assert result["stopReason"] == "end_turn"
        assert census.peak[sid] == 1 and census.started[sid] == 2
        seqs = await _assert_log_whole(store, sid, client, other)
        assert len(seqs) > 4
        await client.close()
        await other.close()


async def test_delete_on_a_locked_database_never_starts_a_second_actor(
    server_factory: Any, workspace: Path, db_url: str, census: Census
) -> None:
    async with _server(server_factory, db_url) as server:
        store = server.app.state.agentd.store
        client, other = await server.client(), await server.client()
        sid = await new_session(client, workspace)
        prompt = await _start_streaming_turn(client, sid)
        async with database_write_lock(db_url) as release:
            _assert_stopping(await client.request("session/delete", {"sessionId": sid}))
            _assert_stopping(await other.request("session/load", _load_params(sid, workspace)))
            assert census.running[sid] == 1
            assert await store.get_session(sid) is not None  # a failed delete changed nothing
            await release()
            assert await _until_ok(client, "session/delete", {"sessionId": sid}) == {}
        await asyncio.wait_for(prompt, BOUND_S)
        missing = await other.request("session/load", _load_params(sid, workspace))
        assert missing["error"]["code"] == -32002
        assert census.peak[sid] == 1
        assert await store.get_session(sid) is None and await store.read_events(sid) == []
        await client.close()
        await other.close()


async def test_idle_eviction_on_a_locked_database_never_starts_a_second_actor(
    server_factory: Any, workspace: Path, db_url: str, census: Census
) -> None:
    async with _server(server_factory, db_url, scripted({"text": "hello back"}, loop=True)) as server:
        state = server.app.state.agentd
        manager, store = state.manager, state.store
        client, other = await server.client(), await server.client()
        sid = await new_session(client, workspace)
        await client.call("_agentd/session/detach", {"sessionId": sid})
        async with database_write_lock(db_url) as release:
            # A mode change whose event cannot commit yet; the actor stays idle (no
            # clients, no work) and takes the change at once.
            set_mode = {"sessionId": sid, "modeId": "plan"}
            mode = asyncio.create_task(client.request("session/set_mode", set_mode))
            await until(lambda: manager.live_actor(sid).mode().value == "plan")
            sweep = asyncio.create_task(manager.evict_idle(0.0))
            await until(lambda: manager.live_actor(sid) is None)
            _assert_stopping(await other.request("session/load", _load_params(sid, workspace)))
            assert census.running[sid] == 1
            await release()
            await _until_ok(other, "session/load", _load_params(sid, workspace))
            await asyncio.wait_for(sweep, BOUND_S)
        assert (await asyncio.wait_for(mode, BOUND_S)).get("result") == {}
        result = await other.call("session/prompt", text_prompt(sid, "hello"))
        assert result["stopReason"] == "end_turn"
        assert census.peak[sid] == 1 and census.started[sid] == 2
        events = await store.read_events(sid)
        assert "mode_changed" in {e.kind for e in events}
        await _assert_log_whole(store, sid, client, other)
        await client.close()
        await other.close()


# ---------------------------------------------------------------------------- refused batch


async def _refuse_poison(store: Store) -> None:
    """A trigger that makes the database refuse (for good) any event mentioning POISON."""
    async with store.engine.begin() as conn:
        if store.engine.dialect.name == "sqlite":
            await conn.execute(
                text(
                    "CREATE TRIGGER poison BEFORE INSERT ON events WHEN NEW.payload LIKE '%POISON%' "
                    "BEGIN SELECT RAISE(ABORT, 'poison refused'); END"
                )
            )
        else:
            await conn.execute(
                text(
                    "CREATE FUNCTION poison() RETURNS trigger AS $$ BEGIN "
                    "IF NEW.payload::text LIKE '%POISON%' THEN "
                    "RAISE EXCEPTION 'poison refused' USING ERRCODE = 'check_violation'; END IF; "
                    "RETURN NEW; END $$ LANGUAGE plpgsql"
                )
            )
            await conn.execute(
                text("CREATE TRIGGER poison BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION poison()")
            )


async def test_a_refused_batch_fails_the_session_loudly_and_it_reloads_without_a_gap(
    server_factory: Any, workspace: Path, db_url: str, census: Census, caplog: pytest.LogCaptureFixture
) -> None:
    provider = scripted({"text": "fine"}, loop=True)
    caplog.set_level(logging.ERROR)
    async with server_factory(provider, database_url=db_url) as server:
        state = server.app.state.agentd
        store = state.store
        client, watcher = await server.client(), await server.client()
        sid = await new_session(client, workspace)
        bystander = await new_session(watcher, workspace)
        assert (await client.call("session/prompt", text_prompt(sid, "hello")))["stopReason"] == "end_turn"
        before = [e.seq for e in await store.read_events(sid)]
        await _refuse_poison(store)
        poisoned = await client.request("session/prompt", text_prompt(sid, "POISON"))
        # The request does not claim success, and the log says what happened.
        assert "error" in poisoned, poisoned
        assert poisoned["error"]["data"] == {"reason": "session_failed", "retryable": True}
        assert any("FAILED" in r.getMessage() and sid in r.getMessage() for r in caplog.records)
        # The attached client is told to resync from the last event it really got.
        resync = await client.wait_notification(lambda m: m["method"] == "_agentd/resync_required")
        assert resync["params"] == {"sessionId": sid, "lastSeq": before[-1], "reason": "session_failed"}
        assert state.writer.dropped_batches == 1
        # Nothing after the refused batch was committed: no gap, nothing shown that is lost.
        assert [e.seq for e in await store.read_events(sid)] == before
        await _assert_log_whole(store, sid, client)
        # Another session is not affected.
        bystanding = await watcher.call("session/prompt", text_prompt(bystander, "hi"))
        assert bystanding["stopReason"] == "end_turn"
        # The next request reloads the session from the store's real last seq.
        await _until_ok(client, "session/load", _load_params(sid, workspace))
        again = await client.call("session/prompt", text_prompt(sid, "hello again"))
        assert again["stopReason"] == "end_turn"
        seqs = await _assert_log_whole(store, sid, client)
        assert len(seqs) > len(before)
        assert census.peak[sid] == 1 and census.started[sid] == 2
        await client.close()
        await watcher.close()


# ---------------------------------------------------------------------------- bounded pool waits


async def test_an_exhausted_pool_answers_a_retryable_overload_error_and_recovers(
    server_factory: Any, workspace: Path, db_url: str
) -> None:
    async with server_factory(
        scripted({"text": "ok"}, loop=True),
        database_url=db_url,
        db_pool_size=2,
        db_pool_overflow=0,
        db_pool_timeout_s=0.2,
        # A request waits for a connection until its deadline (30 s by default) before it
        # is refused: a short one refuses the two below in 2 s, not 60.
        request_deadline_s=1.0,
    ) as server:
        store = server.app.state.agentd.store
        client = await server.client()
        sid = await new_session(client, workspace)
        # Every pooled connection is busy (as under a flood of requests).
        held = [await store.engine.connect() for _ in range(2)]
        try:
            for method, params in (
                ("session/new", {"cwd": str(workspace), "mcpServers": []}),
                ("session/list", {}),
            ):
                response = await client.request(method, params)
                assert "error" in response, response
                error = response["error"]
                assert error["code"] == -32019, error
                assert error["data"]["reason"] == "overloaded" and error["data"]["retryable"] is True
                assert error["data"]["limit"] == "db_pool"
            # A live session goes on meanwhile: its events commit on the writer's own
            # connection, not behind the flood.
            still = await asyncio.wait_for(client.call("session/prompt", text_prompt(sid, "still?")), BOUND_S)
            assert still["stopReason"] == "end_turn"
        finally:
            for conn in held:
                await conn.close()
        # Afterwards everything works again, the existing session included.
        assert (await client.call("session/prompt", text_prompt(sid, "hi")))["stopReason"] == "end_turn"
        assert await new_session(client, workspace)
        await client.close()


def test_only_database_waits_count_as_overload() -> None:
    pool = overload_error(sa_exc.TimeoutError("QueuePool limit reached"))
    assert pool is not None and pool.code == -32019 and pool.data["limit"] == "db_pool"
    locked = overload_error(sa_exc.OperationalError("INSERT", {}, Exception("database is locked")))
    assert locked is not None and locked.data == {**locked.data, "reason": "overloaded", "retryable": True}
    # A timeout elsewhere (not in the database layer) stays an internal error.
    try:
        raise TimeoutError
    except TimeoutError as exc:
        assert overload_error(exc) is None
    assert overload_error(ValueError("bug")) is None
