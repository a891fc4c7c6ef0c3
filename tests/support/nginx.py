"""deploy/nginx.conf run for real on loopback in front of `agentd serve` replicas — each on a
fixed port, so a replica killed and restarted comes back at the address nginx knows."""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import REPO_ROOT
from tests.support.polling import until
from tests.support.proc import AgentdProcess, agentd_process, server_env, wait_healthy

NGINX_CONF = REPO_ROOT / "deploy" / "nginx.conf"


def nginx_binary() -> str:
    nginx = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")
    if nginx is None:
        pytest.skip("nginx is not installed here")
    return nginx


def local_nginx_conf(directory: Path, replica_ports: dict[str, int], listen: int) -> Path:
    """deploy/nginx.conf as it is, its replicas (compose service names) and port moved to
    loopback, in a minimal main file."""
    site = re.sub(
        r"server ([\w-]+):(\d+)",
        lambda m: f"server 127.0.0.1:{replica_ports.get(m[1], m[2])}",
        NGINX_CONF.read_text(),
    )
    site = re.sub(r"listen \d+;", f"listen 127.0.0.1:{listen};", site)
    (directory / "site.conf").write_text(site)
    temp = " ".join(
        f"{kind}_temp_path {directory / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    main = directory / "main.conf"
    main.write_text(
        f"pid {directory / 'nginx.pid'}; error_log {directory / 'error.log'}; daemon off; events {{}}\n"
        f"http {{ access_log off; {temp} include {directory / 'site.conf'}; }}\n"
    )
    return main


async def listening(port: int) -> bool:
    with contextlib.suppress(OSError):
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.close()
        await writer.wait_closed()
        return True
    return False


@contextlib.asynccontextmanager
async def running_nginx(directory: Path, replica_ports: dict[str, int], listen: int) -> AsyncIterator[Any]:
    """nginx on `listen` with deploy/nginx.conf, accepting connections, until the block ends."""
    nginx = nginx_binary()
    await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
    main = local_nginx_conf(directory, replica_ports, listen)
    log = (directory / "out.log").open("wb")
    proc = await asyncio.create_subprocess_exec(
        nginx, "-c", str(main), "-p", str(directory), stdout=log, stderr=log
    )
    log.close()
    try:
        await until(lambda: listening(listen), what=f"nginx listening on {listen}")
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


@contextlib.asynccontextmanager
async def agentd_serve_at(
    home: Path, port: int, log_name: str, **settings: str
) -> AsyncIterator[AgentdProcess]:
    """`agentd serve` on the given loopback port (tests/support/proc.py `agentd_serve` picks
    a free one), healthy when yielded, killed on exit."""
    await asyncio.to_thread(home.mkdir, parents=True, exist_ok=True)
    env = server_env(home, port=str(port), provider="scripted", **settings)
    log = home / log_name
    async with agentd_process(["serve", "--log-level", "warning"], env=env, log=log) as proc:
        base = f"http://127.0.0.1:{port}"
        await wait_healthy(base, proc, log)
        yield AgentdProcess(base, proc, log)
