"""R-X4: secrets never reach the logs — not the database password, not a provider key,
not credentials inside a provider URL, not a bearer token."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import httpx

from agentd.infra.config import redact_url
from tests.support.databases import postgres_database
from tests.support.proc import agentd_process, free_port, wait_healthy


def test_passwords_in_urls_are_redacted() -> None:
    assert redact_url("postgresql+asyncpg://agentd:s3cret@db:5432/agentd") == (
        "postgresql+asyncpg://agentd:***@db:5432/agentd"
    )
    assert redact_url("https://user:pw@proxy.example/v1") == "https://user:***@proxy.example/v1"
    assert redact_url("sqlite+aiosqlite:////tmp/a.db") == "sqlite+aiosqlite:////tmp/a.db"
    assert redact_url("https://api.openai.com/v1") == "https://api.openai.com/v1"


async def test_serve_logs_no_secret(tmp_path: Path, workspace: Path) -> None:
    async with postgres_database() as url:
        # Trust auth accepts any password, so the server really runs with this one.
        with_password = url.replace("postgres@", "postgres:db-s3cret-pw@", 1)
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
        env.update(
            AGENTD_HOME=str(tmp_path / "home"),
            HOME=str(tmp_path),
            AGENTD_OPENAI_API_KEY="sk-key-s3cret",
            AGENTD_OPENAI_BASE_URL="http://proxyuser:proxy-s3cret@127.0.0.1:9/v1",
            AGENTD_AUTH="token",
        )
        args = ["serve", "--port", str(port), "--database-url", with_password, "--provider", "openai",
                "--log-level", "debug"]  # fmt: skip
        log = tmp_path / "serve.log"
        async with agentd_process(args, env=env, log=log) as proc:
            base = f"http://127.0.0.1:{port}"
            await wait_healthy(base, proc, log)
            async with httpx.AsyncClient(base_url=base, timeout=10) as http:
                # A request with a (wrong) token is refused; the token must not be logged either.
                body = {"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}}
                resp = await http.post(
                    "/rpc", json=body, headers={"Authorization": "Bearer agentd_tok-s3cret"}
                )
                assert resp.status_code == 401
            # A clean stop: everything the server logged has reached the file when it exits.
            proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(30):
                await proc.wait()
        output = await asyncio.to_thread(log.read_text)
    assert "database: postgresql+asyncpg://postgres:***@" in output  # it did log the URL...
    assert "openai-compatible at http://proxyuser:***@127.0.0.1:9/v1" in output
    for secret in ("db-s3cret-pw", "sk-key-s3cret", "proxy-s3cret", "tok-s3cret"):
        assert secret not in output  # ...but none of the secrets
