"""`agentd serve` freezes its start-up heap out of the garbage collector's walks (issue 32:
a full collection walked ~150k start-up objects, ~0.4 ms of a trivial turn's CPU); a server
embedded in another program leaves that program's heap alone."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from fastapi import FastAPI

from agentd.serve import server_for


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the test process's own objects go back to the collector


async def _main_loop_once(freeze_heap: bool) -> None:
    server = server_for(FastAPI(), host="127.0.0.1", port=0, freeze_heap=freeze_heap)

    async def stop(counter: int) -> bool:
        return True  # the first tick ends the loop

    server.on_tick = stop  # type: ignore[method-assign]
    await server.main_loop()


@pytest.mark.usefixtures("unfrozen")
async def test_the_serve_command_s_server_freezes_the_heap_when_it_starts_serving() -> None:
    await _main_loop_once(freeze_heap=True)
    assert gc.get_freeze_count() > 0


@pytest.mark.usefixtures("unfrozen")
async def test_an_embedded_server_leaves_the_heap_to_its_program() -> None:
    await _main_loop_once(freeze_heap=False)
    assert gc.get_freeze_count() == 0
