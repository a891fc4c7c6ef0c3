"""A deterministic gated provider: a scripted provider whose chosen calls pause until the
test releases them, so "while the first turn is still running" is a fact the test
arranged, not a delay it hoped was long enough."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from agentd.core.provider import ProviderRequest, StreamEvent
from agentd.providers.scripted import ScriptedProvider


class GatedProvider:
    """Calls listed in `hold` (0-based call numbers) pause right after their first event
    until `release(n)`; `held(n)` returns once call n is paused there."""

    name = "gated"

    def __init__(self, inner: ScriptedProvider, hold: set[int]) -> None:
        self.inner = inner
        self.supports_native_schema = inner.supports_native_schema
        self._gates = {n: asyncio.Event() for n in hold}
        self._held = {n: asyncio.Event() for n in hold}

    @property
    def requests(self) -> list[ProviderRequest]:
        return self.inner.requests

    def release(self, n: int) -> None:
        self._gates[n].set()

    async def held(self, n: int, within: float = 30) -> None:
        """Until call n is paused at its gate (`within` only stops a hang)."""
        await asyncio.wait_for(self._held[n].wait(), within)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        n = len(self.inner.requests)  # this call's number (the inner provider appends it)
        gate = self._gates.get(n)
        first = True
        async with contextlib.aclosing(self.inner.stream(request)) as events:  # type: ignore[type-var]
            async for ev in events:
                yield ev
                if first and gate is not None:
                    first = False
                    self._held[n].set()
                    await gate.wait()

    async def aclose(self) -> None:
        closer = getattr(self.inner, "aclose", None)
        if closer is not None:
            await closer()
