"""A real `agentd serve` runs under glibc's malloc unless told otherwise (AGENTD_MALLOC,
agentd/cli/allocator.py): the server itself reports the allocator it is running under, so
this fails if the switch silently stops applying (issue 32 item 3)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from tests.support.proc import agentd_process, free_port, wait_healthy


async def allocator_of_a_real_serve(tmp_path: Path, **variables: str) -> tuple[str, str]:
    """(the allocator the server reports, PYTHONMALLOC as its process started)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_") and k != "PYTHONMALLOC"}
    env.update(AGENTD_HOME=str(tmp_path / "home"), HOME=str(tmp_path), **variables)
    log = tmp_path / "serve.log"
    args = ["serve", "--port", str(port), "--database-url", f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"]
    async with agentd_process(args, env=env, log=log) as proc:
        await wait_healthy(f"http://127.0.0.1:{port}", proc, log)
        environ = await asyncio.to_thread(Path(f"/proc/{proc.pid}/environ").read_bytes)
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):
            await proc.wait()
    output = await asyncio.to_thread(log.read_text)
    reported = [
        line.split("memory allocator: ", 1)[1].strip()
        for line in output.splitlines()
        if "memory allocator: " in line
    ]
    assert len(reported) == 1, output
    started = dict(v.split(b"=", 1) for v in environ.split(b"\0") if b"=" in v).get(b"PYTHONMALLOC", b"")
    return reported[0], started.decode()


@pytest.mark.skipif(not os.uname().sysname == "Linux", reason="the switch applies on Linux only")
async def test_serve_runs_under_malloc_by_default(tmp_path: Path) -> None:
    # The same process (pid, log) re-ran itself with the variable: the exec's environment.
    assert await allocator_of_a_real_serve(tmp_path) == ("malloc", "malloc")


async def test_agentd_malloc_pymalloc_keeps_the_interpreters_own(tmp_path: Path) -> None:
    assert await allocator_of_a_real_serve(tmp_path, AGENTD_MALLOC="pymalloc") == ("pymalloc", "")


async def test_a_pythonmalloc_the_caller_set_is_kept(tmp_path: Path) -> None:
    assert await allocator_of_a_real_serve(tmp_path, PYTHONMALLOC="pymalloc") == ("pymalloc", "pymalloc")
