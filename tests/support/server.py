"""A real agentd app served in this process on a free loopback port (`running_server`; the
`server_factory` fixture in conftest.py wraps it), and the scripted provider tests drive it with."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentd.app import create_app
from agentd.core.provider import Provider
from agentd.embedded import serve_in_background
from agentd.infra.config import PermissionMode, ProviderName, Settings
from agentd.providers.scripted import ScriptedProvider
from tests.support.browser import server_stopping
from tests.support.client import WsClient
from tests.support.databases import premigrate_sqlite


@dataclass
class Server:
    base_url: str
    settings: Settings
    provider: Provider
    app: Any

    async def client(self, **caps: Any) -> WsClient:
        return await WsClient.connect(self.base_url, **caps)


ServerFactory = Callable[..., Any]
TEST_SHUTDOWN_GRACE_S = 1.0  # the default is 10 s


@asynccontextmanager
async def running_server(
    *,
    home: Path,
    provider: Provider,
    database_url: str | None = None,
    permission_mode: PermissionMode = PermissionMode.DEFAULT,
    tools: dict[str, Any] | None = None,
    fallbacks: list[Any] | None = None,
    clock: Callable[[], float] | None = None,
    **settings_kw: Any,
) -> AsyncIterator[Server]:
    """`tools` replaces the built-in tool set (e.g. builtin_tools() plus a test tool);
    `clock` the rate limiter's (a `tests.support.clock.FakeClock`)."""
    # A test that leaves its server with a turn still running (often on purpose: a restart
    # must resume it) waits half the shutdown grace for it to reach its gate: 0.5 s here,
    # not 5 s. Tests of the shutdown itself set their own.
    settings_kw.setdefault("shutdown_grace_s", TEST_SHUTDOWN_GRACE_S)
    # The provider's model list is asked for only by the tests about it: the others count
    # their fake provider's connections and requests.
    settings_kw.setdefault("models_ttl_s", 0)
    settings = Settings(
        home=home,
        database_url=database_url,
        provider=ProviderName.SCRIPTED,
        permission_mode=permission_mode,
        **settings_kw,
    )
    await premigrate_sqlite(settings.resolved_database_url())
    app = create_app(settings, provider=provider, tools=tools, fallbacks=fallbacks, clock=clock)
    async with serve_in_background(app) as base:
        try:
            yield Server(base, settings, provider, app)
        finally:
            server_stopping()  # a page's refused reconnects from here on are expected


def scripted(*steps: dict[str, Any], loop: bool = False) -> ScriptedProvider:
    return ScriptedProvider.from_dict({"loop": loop, "steps": list(steps)})
