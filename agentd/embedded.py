"""Run the real server inside the current event loop on a free loopback port
(used by `agentd demo`, tests and benchmarks)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

from agentd.serve import server_for


@contextlib.contextmanager
def _keep_signal_handlers() -> Iterator[None]:
    """Stands in for uvicorn's `capture_signals`: installs nothing."""
    yield


@contextlib.asynccontextmanager
async def serve_in_background(app: Any, *, host: str = "127.0.0.1") -> AsyncIterator[str]:
    """Yield the base URL (http://host:port) while uvicorn serves `app` on a free port."""
    server = server_for(app, host=host, port=0, log_level="warning")
    # The embedding program owns signal handling (and tests may run off the main thread).
    server.capture_signals = _keep_signal_handlers  # type: ignore[method-assign]
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()  # raise the startup error
            raise RuntimeError("server stopped during startup")
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{port}"
    finally:
        server.request_exit()
        with contextlib.suppress(asyncio.CancelledError):
            await task
