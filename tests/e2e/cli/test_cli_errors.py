"""Mistakes get one readable line and exit code 2, never a traceback (issue 10): a bad or
unreachable database, a missing script, a provider without its key, a port in use. With
`--debug` or AGENTD_LOG_LEVEL=debug the traceback is shown too. All on the real CLI."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.cli import Run, agentd, clean_env
from tests.support.proc import agentd_process, free_port, wait_healthy

UNREACHABLE_PG = "postgresql+asyncpg://postgres@127.0.0.1:1/agentd"  # nothing listens on port 1
BAD_URLS = [
    pytest.param(
        UNREACHABLE_PG, "cannot connect to postgresql+asyncpg://postgres@127.0.0.1:1/agentd", id="down"
    ),
    pytest.param("nonsense://somewhere/db", "cannot use 'nonsense://somewhere/db'", id="bad-scheme"),
    pytest.param("not a url at all", "cannot use 'not a url at all'", id="not-a-url"),
]


def one_line_error(run: Run, *fragments: str) -> None:
    assert run.code == 2, run.text
    assert "Traceback" not in run.text
    lines = run.err.strip().splitlines()
    assert len(lines) == 1, run.err
    assert lines[0].startswith("agentd: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize(("url", "message"), BAD_URLS)
async def test_serve_with_a_bad_database_url(tmp_path: Path, url: str, message: str) -> None:
    env = clean_env(tmp_path, AGENTD_DATABASE_URL=url)
    run = await agentd("serve", "--port", str(free_port()), env=env, cwd=tmp_path)
    one_line_error(run, "AGENTD_DATABASE_URL", message)


@pytest.mark.parametrize(("url", "message"), BAD_URLS)
async def test_migrate_with_a_bad_database_url(tmp_path: Path, url: str, message: str) -> None:
    run = await agentd("migrate", "--database-url", url, env=clean_env(tmp_path), cwd=tmp_path)
    one_line_error(run, "AGENTD_DATABASE_URL", message)


async def test_a_missing_script_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    env = clean_env(tmp_path, AGENTD_SCRIPT=str(missing))
    run = await agentd("serve", "--port", str(free_port()), env=env, cwd=tmp_path)
    one_line_error(run, "AGENTD_SCRIPT", str(missing))
    assert not (tmp_path / ".agentd").exists()  # refused before the database


async def test_an_invalid_script_file(tmp_path: Path) -> None:
    script = tmp_path / "bad.json"
    script.write_text('{"steps": [{"txt": "typo"}]}')
    env = clean_env(tmp_path, AGENTD_SCRIPT=str(script))
    run = await agentd("serve", "--port", str(free_port()), env=env, cwd=tmp_path)
    one_line_error(run, "AGENTD_SCRIPT", "steps[0].txt")


@pytest.mark.parametrize(
    ("provider", "variable"), [("openai", "AGENTD_OPENAI_API_KEY"), ("anthropic", "AGENTD_ANTHROPIC_API_KEY")]
)
async def test_a_provider_without_its_key_refuses_to_start(
    tmp_path: Path, provider: str, variable: str
) -> None:
    env = clean_env(tmp_path, AGENTD_PROVIDER=provider)
    run = await agentd("serve", "--port", str(free_port()), env=env, cwd=tmp_path)
    one_line_error(run, variable, f"AGENTD_PROVIDER={provider}")
    assert not (tmp_path / ".agentd").exists()


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


async def test_a_port_in_use_is_reported_before_the_start_up_work(tmp_path: Path, busy_port: int) -> None:
    run = await agentd("serve", "--port", str(busy_port), env=clean_env(tmp_path), cwd=tmp_path)
    one_line_error(run, "AGENTD_PORT", f"port {busy_port}", "already in use")
    # Refused before the slow work: no database was created or migrated.
    assert not (tmp_path / ".agentd").exists()


@pytest.mark.parametrize("how", ["flag", "env"])
async def test_debug_shows_the_traceback(tmp_path: Path, how: str) -> None:
    extra = {"AGENTD_LOG_LEVEL": "debug"} if how == "env" else {}
    flags = ["--debug"] if how == "flag" else []
    run = await agentd(
        *flags, "migrate", "--database-url", UNREACHABLE_PG, env=clean_env(tmp_path, **extra), cwd=tmp_path
    )
    assert run.code == 2, run.text
    assert "Traceback" in run.err
    assert run.err.strip().splitlines()[-1].startswith("agentd: error: AGENTD_DATABASE_URL: cannot connect")


async def test_token_auth_without_a_token_starts_and_says_how_to_create_one(tmp_path: Path) -> None:
    port = free_port()
    env = clean_env(tmp_path, AGENTD_AUTH="token", AGENTD_HOME=str(tmp_path / "home"))
    log = tmp_path / "serve.log"
    base = f"http://127.0.0.1:{port}"
    async with agentd_process(["serve", "--port", str(port)], env=env, log=log) as proc:
        await wait_healthy(base, proc, log)
        async with httpx.AsyncClient(base_url=base) as http:
            assert (await http.get("/readyz")).status_code == 200
            assert (
                await http.post("/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "session/list"})
            ).status_code == 401
    output = log.read_text()
    hints = [line for line in output.splitlines() if "agentd token create" in line]
    assert len(hints) == 1, output
    assert "AGENTD_AUTH=token" in hints[0] and "Traceback" not in output


async def test_a_second_serve_on_the_same_sqlite_file_refuses_to_start(tmp_path: Path) -> None:
    """SQLite is single-process (R-C1 needs Postgres): two real `agentd serve` on one file —
    the second says so in one line and exits 2; the first goes on serving, and once it is
    killed (-9: the kernel drops its lock) the file can be served again."""
    env = clean_env(tmp_path, AGENTD_HOME=str(tmp_path / "home"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "first.log"
    async with agentd_process(["serve", "--port", str(port)], env=env, log=log) as first:
        await wait_healthy(base, first, log)
        run = await agentd("serve", "--port", str(free_port()), env=env, cwd=tmp_path)
        one_line_error(run, "AGENTD_DATABASE_URL", "in use by another agentd process", f"pid {first.pid}")
        async with httpx.AsyncClient(base_url=base) as http:
            assert (await http.get("/readyz")).status_code == 200
        first.kill()
        await first.wait()
    port = free_port()
    async with agentd_process(["serve", "--port", str(port)], env=env, log=tmp_path / "again.log") as again:
        await wait_healthy(f"http://127.0.0.1:{port}", again, tmp_path / "again.log")
