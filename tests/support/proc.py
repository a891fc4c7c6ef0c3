"""A real `agentd serve` subprocess for the reliability suite: settings through the
environment (as an operator sets them), its own log file, RSS read from /proc, `kill -9`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.databases import premigrate_sqlite
from tests.support.polling import until, value_of


@dataclass
class AgentdProcess:
    base_url: str
    proc: Any  # asyncio.subprocess.Process
    log: Path

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def rss_bytes(self) -> int:
        """Resident set size of the server process (VmRSS), not of the test runner."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError(f"no VmRSS for pid {self.pid}")

    async def kill9(self) -> None:
        with contextlib.suppress(ProcessLookupError):  # it may be dead already
            os.kill(self.pid, signal.SIGKILL)
        async with asyncio.timeout(30):
            assert await self.proc.wait() == -signal.SIGKILL

    async def output(self) -> str:
        return await asyncio.to_thread(self.log.read_text, errors="replace")


def server_env(home: Path, **settings: str) -> dict[str, str]:
    """The test runner's environment without its AGENTD_* variables, plus `settings`
    (`database_url="…"` becomes AGENTD_DATABASE_URL)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(HOME=str(home), AGENTD_HOME=str(home / "agentd"))
    env.update({f"AGENTD_{k.upper()}": v for k, v in settings.items()})
    return env


def write_script(path: Path, steps: list[dict[str, Any]], *, loop: bool = True) -> Path:
    path.write_text(json.dumps({"loop": loop, "steps": steps}))
    return path


@contextlib.asynccontextmanager
async def agentd_serve(
    home: Path, log_name: str = "serve.log", **settings: str
) -> AsyncIterator[AgentdProcess]:
    """`agentd serve` on a free loopback port, healthy when yielded; killed (the whole
    process group) on exit if still running."""
    await asyncio.to_thread(home.mkdir, parents=True, exist_ok=True)
    port = free_port()
    env = server_env(home, port=str(port), **{"provider": "scripted", **settings})
    log = home / log_name
    async with agentd_process(["serve", "--log-level", "warning"], env=env, log=log) as proc:
        base = f"http://127.0.0.1:{port}"
        await wait_healthy(base, proc, log)
        yield AgentdProcess(base, proc, log)


@contextlib.asynccontextmanager
async def agentd_serve_on(tmp_path: Path, port: int, script: dict[str, Any]) -> AsyncIterator[Any]:
    """`agentd serve` on `port` with a scripted provider and a SQLite file shared by every
    server started this way under `tmp_path` — so a test can kill one and start the next on
    the same address and the same sessions."""
    path = tmp_path / "script.json"
    await asyncio.to_thread(path.write_text, json.dumps(script))
    args = scripted_serve_args(port, shared_database_url(tmp_path), path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(AGENTD_HOME=str(tmp_path / "server-home"), HOME=str(tmp_path))
    log = tmp_path / f"serve-{port}.log"
    async with agentd_process(args, env=env, log=log) as proc:
        await wait_healthy(f"http://127.0.0.1:{port}", proc, log)
        yield proc


def scripted_serve_args(port: int, database_url: str, script: Path, *more: str) -> list[str]:
    """`agentd serve`'s arguments on `port` and `database_url`, the scripted provider playing
    `script`, warnings only in its log; `more` after them (`--permission-mode bypass`, …)."""
    return [
        "serve", "--port", str(port), "--database-url", database_url, "--provider", "scripted",
        "--script", str(script), "--log-level", "warning", *more,
    ]  # fmt: skip


def shared_database_url(tmp_path: Path) -> str:
    """The SQLite database every `agentd_serve_on(tmp_path, …)` server opens."""
    return f"sqlite+aiosqlite:///{tmp_path / 'shared.db'}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pids_with_cwd(directory: Path) -> list[int]:
    """Processes (ours: the bash tool's children) whose working directory is `directory`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            if Path(os.readlink(f"/proc/{entry}/cwd")) == directory:
                found.append(int(entry))
    return found


def served_database(args: list[str], env: dict[str, str]) -> str | None:
    """The database `agentd serve` with these arguments and environment opens, when it can
    be told without reading a config file (None then)."""
    if args[:1] != ["serve"] or "--config" in args or "AGENTD_CONFIG" in env:
        return None
    if "--database-url" in args:
        return args[args.index("--database-url") + 1]
    if "AGENTD_DATABASE_URL" in env:
        return env["AGENTD_DATABASE_URL"]
    home = env.get("AGENTD_HOME")
    return f"sqlite+aiosqlite:///{Path(home) / 'agentd.db'}" if home else None


@contextlib.asynccontextmanager
async def agentd_process(args: list[str], *, env: dict[str, str], log: Path) -> AsyncIterator[Any]:
    """`agentd` with `args` as a real process (its own process group), output to `log`.
    A `serve` whose SQLite file does not exist yet gets a migrated copy first (no Alembic
    import and upgrade in each new process; `agentd migrate` is tested on its own)."""
    url = served_database(args, env)
    if url is not None:
        await premigrate_sqlite(url)
    out = await asyncio.to_thread(log.open, "wb")
    try:
        proc = await asyncio.create_subprocess_exec(
            *agentd_command(), *args, env=env, stdout=out, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    finally:
        out.close()  # the child has its own copy of the descriptor
    try:
        yield proc
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()


async def wait_healthy(base_url: str, proc: Any, log: Path) -> None:
    """Until the server is up and its app started: /healthz answers from the moment the
    socket listens, /readyz says `starting` until the app is loaded (agentd/serve.py); a
    test then finds its lifespan's work done (log lines, idle memory), as before."""
    async with httpx.AsyncClient() as http:
        for _ in range(600):  # up to ~30 s for the interpreter to import and migrate
            if proc.returncode is not None:
                output = await asyncio.to_thread(log.read_text)
                pytest.fail(f"agentd serve exited with {proc.returncode}:\n{output}")
            with contextlib.suppress(httpx.TransportError):
                if (
                    await http.get(f"{base_url}/healthz", timeout=2)
                ).status_code == 200 and not await starting(http, base_url):
                    return
            await asyncio.sleep(0.05)
    output = await asyncio.to_thread(log.read_text)
    pytest.fail(f"agentd serve never became healthy:\n{output}")


async def starting(http: httpx.AsyncClient, base_url: str) -> bool:
    """Whether the server's app is still loading (any other /readyz answer is the app's)."""
    resp = await http.get(f"{base_url}/readyz", timeout=10)
    return resp.status_code == 503 and resp.json().get("status") == "starting"


def agentd_command() -> list[str]:
    exe = shutil.which("agentd", path=os.path.dirname(sys.executable)) or shutil.which("agentd")
    return [exe] if exe else [sys.executable, "-m", "agentd.cli"]


def read_pid(path: Path) -> int | None:
    """The pid in `path` once it is completely written, else None."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return int(text) if text.endswith("\n") and text.strip().isdigit() else None


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):  # it was reaped between open and read
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state != "Z"  # a killed child nobody reaped yet is dead


async def wait_pid(path: Path, within: float = 30.0) -> int:
    """The pid a process wrote to `path`, once the whole line is there."""
    return await value_of(lambda: read_pid(path), within, what=f"a pid in {path}")


async def wait_dead(pid: int, within: float = 30.0) -> None:
    """Until `pid` is gone (or a zombie); AssertionError if it survives `within` s."""
    await until(lambda: not process_alive(pid), within, what=f"process {pid} to die")
