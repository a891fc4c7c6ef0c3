"""A real `agentd serve` switches new objects to malloc once started, and says so from the
allocator's own state (agentd/infra/small_alloc.py): this fails if the switch silently stops
applying; `AGENTD_MALLOC_AFTER_START=0` keeps pymalloc (issue 32 item 3)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from tests.support.proc import agentd_process, free_port, wait_healthy


async def allocator_of_a_real_serve(tmp_path: Path, **variables: str) -> str:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_") and k != "PYTHONMALLOC"}
    env.update(AGENTD_HOME=str(tmp_path / "home"), HOME=str(tmp_path), **variables)
    log = tmp_path / "serve.log"
    args = ["serve", "--port", str(port), "--database-url", f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"]
    async with agentd_process(args, env=env, log=log) as proc:
        await wait_healthy(f"http://127.0.0.1:{port}", proc, log)  # /readyz: started, switched
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            await proc.wait()
    output = await asyncio.to_thread(log.read_text)
    said = [
        line.split("new objects from: ", 1)[1].strip()
        for line in output.splitlines()
        if "new objects from: " in line
    ]
    assert len(said) == 1, output
    return said[0]


@pytest.mark.parametrize(
    ("variables", "expected"), [({}, "malloc"), ({"AGENTD_MALLOC_AFTER_START": "0"}, "pymalloc")]
)
async def test_serve_switches_new_objects_to_malloc_unless_told_not_to(
    tmp_path: Path, variables: dict[str, str], expected: str
) -> None:
    assert await allocator_of_a_real_serve(tmp_path, **variables) == expected
