"""`agentd doctor` and what a first start says (issue 31, item 6), as real processes: the
optional parts hidden by a PATH without them, a Postgres that does not answer, a proxy set;
the first start logs the page's address, no migration chatter, and one line per missing
part."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.support.cli import agentd, clean_env
from tests.support.proc import agentd_process, wait_healthy


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def empty_path(tmp_path: Path) -> str:
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    return str(folder)


async def test_doctor_lists_each_part_and_what_it_changes(tmp_path: Path) -> None:
    env = clean_env(tmp_path, AGENTD_HOME=str(tmp_path / "home"), HTTPS_PROXY="http://me:pw@proxy.corp:3128")
    run = await agentd("doctor", env=env, cwd=tmp_path)
    assert run.code == 0, run.text
    lines = run.out.strip().splitlines()
    assert [line.split()[1].rstrip(":") for line in lines] == [
        "ripgrep", "bubblewrap", "git", "node", "database", "redis", "proxy",
    ]  # fmt: skip
    assert "proxy https=http://me:***@proxy.corp:3128: model calls go through it" in run.out
    assert "pw@" not in run.text


async def test_doctor_says_what_is_missing_and_unreachable(tmp_path: Path) -> None:
    env = clean_env(
        tmp_path,
        PATH=empty_path(tmp_path),
        AGENTD_HOME=str(tmp_path / "home"),
        AGENTD_DATABASE_URL=f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/nothing",
    )
    run = await agentd("doctor", env=env, cwd=tmp_path)
    assert run.code == 0, run.text
    for part in ("ripgrep", "bubblewrap", "git", "node"):
        assert f"missing  {part}:" in run.out, run.out
    assert "failed   database postgresql+asyncpg://postgres@127.0.0.1:" in run.out
    assert "cannot connect" in run.out
    assert "Traceback" not in run.text


async def test_first_start_names_the_page_and_keeps_migrations_quiet(tmp_path: Path) -> None:
    port = free_port()
    env = clean_env(
        tmp_path,
        PATH=empty_path(tmp_path),
        AGENTD_HOME=str(tmp_path / "home"),
        AGENTD_PORT=str(port),
        AGENTD_LOG_LEVEL="info",
    )
    log = tmp_path / "serve.log"
    async with agentd_process(["serve"], env=env, log=log) as proc:
        await wait_healthy(f"http://127.0.0.1:{port}", proc, log)
        text = log.read_text()
    assert f"open http://127.0.0.1:{port}/" in text
    assert "alembic" not in text  # ~20 INFO lines before: now debug
    assert "ripgrep not found: grep walks the tree in Python" in text
    assert "git not found" in text and "node not found" in text
