"""A provider made at its first sampling call (issue 32, idle memory): importing an HTTP
provider brings in httpx, its SSL and the wire code (+6.4 MiB resident), which a server
that has not yet been asked anything does not need. Its `name` and
`supports_native_schema` are known up front, so logs, usage and the loop's choices see
the same values before and after."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import TYPE_CHECKING, cast

from agentd.core import Provider, ProviderRequest, StreamEvent, one_per_batch

if TYPE_CHECKING:
    from agentd.providers.http import ListsModels, ModelsEndpoint


class LazyProvider:
    def __init__(self, name: str, supports_native_schema: bool, make: Callable[[], Provider]) -> None:
        self.name = name
        self.supports_native_schema = supports_native_schema
        self._make = make
        self.made: Provider | None = None  # the real provider, once a call needed it

    def _real(self) -> Provider:
        made = self.made
        if made is None:
            made = self.made = self._make()
        return made

    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamEvent]:
        """The first call's: make the provider. From then on `stream` is the real
        provider's own (issue 32: two calls less per sampling): the instance's attribute
        hides this method."""
        real = vars(self)["stream"] = self._real().stream
        return real(request)

    def stream_batches(self, request: ProviderRequest) -> AsyncIterator[list[StreamEvent]]:
        """`stream`'s batches (`StreamBatches`), bound the same way at the first call; a
        real provider without them gets its events one per batch."""
        real = self._real()
        batches = getattr(real, "stream_batches", None)
        if batches is None:
            batches = partial(one_per_batch, real.stream)
        vars(self)["stream_batches"] = batches
        return cast("Callable[[ProviderRequest], AsyncIterator[list[StreamEvent]]]", batches)(request)

    def models_endpoint(self) -> ModelsEndpoint:
        """Where the model catalogue lists models (only HTTP providers are made lazily, and
        each lists its models): asking makes the provider, at a session's start, not idle."""
        return cast("ListsModels", self._real()).models_endpoint()

    def forget_session(self, session_id: str) -> None:
        """Passed on to the real provider, once made (its wire cache; none before)."""
        forget = getattr(self.made, "forget_session", None)
        if forget is not None:
            forget(session_id)

    async def aclose(self) -> None:
        if self.made is not None:
            await self.made.aclose()
