"""A `SessionManager` in the test's own process, on a store of its own: the actors, their
writer and a scripted provider, no server around them (tests that drive the manager itself)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentd.core.lane import Lane
from agentd.infra.config import Settings
from agentd.session.eventlog.writer import EventWriter
from agentd.session.manager import SessionManager
from agentd.session.services import ActorServices
from agentd.session.turn_kit import TurnKit
from agentd.store.db import Store
from agentd.tools.registry import builtin_tools
from agentd.transport.render import ACP_RENDERER
from tests.support.databases import premigrate_sqlite
from tests.support.server import scripted


async def open_manager(
    db_url: str, home: Path, *, provider: Any = None, fallbacks: Sequence[Lane] = ()
) -> tuple[Store, EventWriter, SessionManager]:
    """The store (migrated), its started writer and the manager; the caller shuts them down
    (`manager.shutdown`, `writer.stop`, `store.close`), as its test needs."""
    await premigrate_sqlite(db_url)  # a new SQLite file: a migrated copy, not an Alembic upgrade
    store = await Store.open(db_url)
    await store.migrate()
    writer = EventWriter(store, flush_interval=0)
    writer.start()
    services = ActorServices(
        settings=Settings(home=home),
        writer=writer,
        provider=scripted() if provider is None else provider,
        fallbacks=list(fallbacks),
        render=ACP_RENDERER,
        make_kit=lambda: TurnKit(builtin_tools()),
    )
    return store, writer, SessionManager(store, services)
