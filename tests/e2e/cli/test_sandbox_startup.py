"""`agentd serve` and the sandbox setting (issue 13, item 2): off loopback with tokens, a
missing bubblewrap stops the start with one readable line, unless AGENTD_SANDBOX=none
says to run commands unconfined on purpose. bwrap is hidden by a PATH without it."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.support.cli import agentd, clean_env
from tests.support.proc import agentd_process, wait_healthy


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def public_token_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    no_bwrap = tmp_path / "bin"
    no_bwrap.mkdir(exist_ok=True)
    settings = {"AGENTD_HOST": "0.0.0.0", "AGENTD_AUTH": "token", "AGENTD_PORT": str(free_port())}
    settings.update(AGENTD_HOME=str(tmp_path / "home"), **extra)
    return clean_env(tmp_path, PATH=str(no_bwrap), **settings)


async def test_serve_refuses_auto_without_bwrap_off_loopback(tmp_path: Path) -> None:
    run = await agentd("serve", env=public_token_env(tmp_path), cwd=tmp_path)
    assert run.code == 2, run.text
    assert "AGENTD_SANDBOX: refusing to serve on 0.0.0.0" in run.err
    assert "AGENTD_SANDBOX=none" in run.err
    assert "Traceback" not in run.text


async def test_serve_refuses_bwrap_required_but_missing(tmp_path: Path) -> None:
    env = public_token_env(tmp_path, AGENTD_SANDBOX="bwrap", AGENTD_HOST="127.0.0.1", AGENTD_AUTH="none")
    run = await agentd("serve", env=env, cwd=tmp_path)
    assert run.code == 2, run.text
    assert "AGENTD_SANDBOX=bwrap, but bwrap (bubblewrap) is not installed" in run.err


async def test_serve_starts_unsandboxed_when_none_is_explicit(tmp_path: Path) -> None:
    env = public_token_env(tmp_path, AGENTD_SANDBOX="none", AGENTD_LOG_LEVEL="info")
    log = tmp_path / "serve.log"
    async with agentd_process(["serve"], env=env, log=log) as proc:
        await wait_healthy(f"http://127.0.0.1:{env['AGENTD_PORT']}", proc, log)
        text = log.read_text()
    assert "sandbox: off (AGENTD_SANDBOX=none): bash commands run unconfined" in text


async def test_serve_refuses_a_bad_egress_destination_in_one_line(tmp_path: Path) -> None:
    # Addresses, not names: what the proxy checks must be what it connects to.
    env = public_token_env(
        tmp_path, AGENTD_HOST="127.0.0.1", AGENTD_AUTH="none", AGENTD_SANDBOX_EGRESS_ALLOW='["mirror.lan:80"]'
    )
    run = await agentd("serve", env=env, cwd=tmp_path)
    assert run.code == 2, run.text
    assert "AGENTD_SANDBOX_EGRESS_ALLOW" in run.err and "'mirror.lan:80'" in run.err
    assert len(run.err.strip().splitlines()) == 1, run.err
