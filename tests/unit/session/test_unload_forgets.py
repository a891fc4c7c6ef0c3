"""A session the server unloads is forgotten by the providers too (issue 32 item 3): they
keep each session's conversation encoded for its next call (the last 64 sessions'), which
after a load kept ~5 MiB of sessions long evicted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.core.lane import Lane
from tests.support.managers import open_manager
from tests.support.server import scripted


class Forgetting:
    """A provider that records the sessions it is told to forget."""

    def __init__(self, real: Any) -> None:
        self.real, self.forgotten = real, list[str]()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def forget_session(self, session_id: str) -> None:
        self.forgotten.append(session_id)


async def test_an_evicted_session_is_forgotten_by_the_provider_and_its_fallbacks(tmp_path: Path) -> None:
    main, fallback = Forgetting(scripted()), Forgetting(scripted())
    store, writer, manager = await open_manager(
        f"sqlite+aiosqlite:///{tmp_path / 'a.db'}",
        tmp_path / "home",
        provider=main,
        fallbacks=[Lane(provider=fallback, model="m2", name="second")],
    )
    try:
        await store.create_session(id="sess_x", owner="local", cwd=str(tmp_path), mode="bypass", model="m")
        assert await manager.get("sess_x") is not None
        assert main.forgotten == []  # loaded: kept
        await manager.evict("sess_x", grace=1.0)
        assert main.forgotten == fallback.forgotten == ["sess_x"]
    finally:
        await manager.shutdown(grace=1)
        await writer.stop()
        await store.close()
