"""When an idle session actor is unloaded (agentd/session/eviction.py; issue 32 item 3): the
pure decision, and the manager's sweep over real actors with the clock injected (`now`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentd.session.eviction import evictable, eviction_grace
from agentd.session.manager import SessionManager
from tests.support.managers import open_manager

SHORT_BY_AN_ULP = 1000.0411  # an `idle_since` for which `(x + 600) - x < 600` in floats


@pytest.mark.parametrize(
    ("idle_since", "now", "keeps", "evict"),
    [
        (None, 1e9, False, False),  # not idle (a client, a turn, a queued prompt): never
        (None, 1e9, True, False),
        (100.0, 129.9, False, False),  # detached and bare: within the short grace
        (100.0, 130.0, False, True),  # ...and at its end
        (100.0, 130.0, True, False),  # a background task or MCP server: the long grace
        (100.0, 699.9, True, False),
        (100.0, 700.0, True, True),
    ],
)
def test_evictable(idle_since: float | None, now: float, keeps: bool, evict: bool) -> None:
    assert evictable(idle_since, now, keeps_processes=keeps, idle_evict_s=600, detached_evict_s=30) is evict


def test_a_session_is_due_at_the_very_instant_its_grace_ends() -> None:
    """`now = idle_since + grace` is due, whatever the float: for this `idle_since`,
    `(idle_since + 600) - idle_since` is one ulp short of 600 (an elapsed-time comparison
    made the sweep of a test clock set to that instant find nothing, now and then)."""
    since = SHORT_BY_AN_ULP
    assert (since + 600.0) - since < 600.0  # the float case this guards
    assert evictable(since, since + 600.0, keeps_processes=True, idle_evict_s=600, detached_evict_s=30)
    assert not evictable(since, since + 599.999, keeps_processes=True, idle_evict_s=600, detached_evict_s=30)


def test_the_short_grace_never_exceeds_the_long_one() -> None:
    assert eviction_grace(keeps_processes=False, idle_evict_s=10, detached_evict_s=30) == 10
    assert eviction_grace(keeps_processes=False, idle_evict_s=600, detached_evict_s=600) == 600
    assert eviction_grace(keeps_processes=True, idle_evict_s=600, detached_evict_s=0) == 600


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[SessionManager]:
    store, writer, manager = await open_manager(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}", tmp_path / "home")
    try:
        yield manager
    finally:
        await manager.shutdown(grace=1)
        await writer.stop()
        await store.close()


async def test_a_detached_idle_session_goes_after_the_short_grace(
    manager: SessionManager, tmp_path: Path
) -> None:
    actor = await manager.create(cwd=str(tmp_path), owner="local")
    since = actor.idle_since()
    assert since is not None and not actor.keeps_processes()
    assert await manager.evict_idle(600.0, 30.0, now=since + 29.9) == []
    assert manager.live_actor(actor.id) is actor and not manager.released.is_set()
    assert await manager.evict_idle(600.0, 30.0, now=since + 30.0) == [actor.id]
    assert manager.live_actor(actor.id) is None
    assert manager.released.is_set()  # the memory trimmer is woken
    reloaded = await manager.get(actor.id)  # the next request brings it back from the store
    assert reloaded is not None and reloaded is not actor


async def test_a_session_running_a_background_task_waits_the_long_grace(
    manager: SessionManager, tmp_path: Path
) -> None:
    actor = await manager.create(cwd=str(tmp_path), owner="local")
    actor.background.start("sleep 60", tmp_path)
    since = actor.idle_since()
    assert since is not None and actor.keeps_processes()
    assert await manager.evict_idle(600.0, 30.0, now=since + 599.0) == []
    assert manager.live_actor(actor.id) is actor
    assert await manager.evict_idle(600.0, 30.0, now=since + 600.0) == [actor.id]  # (stops the task)


async def test_without_a_short_grace_the_long_one_applies_to_all(
    manager: SessionManager, tmp_path: Path
) -> None:
    actor = await manager.create(cwd=str(tmp_path), owner="local")
    since = actor.idle_since()
    assert since is not None
    assert await manager.evict_idle(600.0, now=since + 599.0) == []
    assert await manager.evict_idle(600.0, now=since + 600.0) == [actor.id]
