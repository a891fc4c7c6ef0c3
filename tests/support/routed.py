"""A provider that routes each call by who is asking: a sub-agent's requests carry its own
system prompt, so a marker in it picks that agent's script; everything else goes to the
session's. Each agent's script then plays in its own order, whatever the interleaving of a
parent and a background child."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from agentd.core.provider import ProviderRequest, StreamEvent


class RoutedProvider:
    name = "routed"
    supports_native_schema = False

    def __init__(self, default: Any, routes: dict[str, Any]) -> None:
        self.default = default
        self.routes = routes  # system-prompt marker → provider (scripted or gated)
        self.requests: list[ProviderRequest] = []  # every call, in order

    def pick(self, request: ProviderRequest) -> Any:
        return next((p for marker, p in self.routes.items() if marker in request.system), self.default)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        async with contextlib.aclosing(self.pick(request).stream(request)) as events:
            async for ev in events:
                yield ev

    async def aclose(self) -> None:
        """Nothing to release."""
