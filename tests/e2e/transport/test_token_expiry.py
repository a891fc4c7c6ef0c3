"""Issue 28 item 3, "or expired": a token made with a lifetime (`agentd token create
--expires-in`) is refused once it has expired, and what it holds open ends then — its
WebSocket (4401), its SSE stream and its Streamable HTTP event stream (`_agentd/token_revoked`
last) — as a revoked token's do; a token without a lifetime is untouched. On SQLite and
Postgres (the expiry is compared in the token queries)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx

from agentd.infra.auth import create_token, parse_duration
from agentd.infra.config import AuthMode
from agentd.transport.revocation import CloseCode
from tests.support.client import WsClient
from tests.support.server import scripted
from tests.support.session import new_session
from tests.support.sse import sse

LIFETIME = timedelta(seconds=3)  # long enough to open everything below, even on a loaded machine
HANG_BOUND_S = 30
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
REVOKED = "_agentd/token_revoked"


async def test_an_expired_tokens_streams_end_and_it_is_refused(
    server_factory, workspace: Path, db_url: str
) -> None:
    async with server_factory(
        scripted({"text": "ok"}, loop=True),
        database_url=db_url,
        auth=AuthMode.TOKEN,
        token_recheck_s=0.2,
        workspace_grants={"alice": [workspace], "bob": [workspace]},
    ) as server:
        store = server.app.state.agentd.store
        lasting, _ = await create_token(store, "bob", teams=["t"])
        bob = await WsClient.connect(server.base_url, token=lasting)
        sid = await new_session(bob, workspace)
        await bob.call("_agentd/session/share", {"sessionId": sid, "team": "t", "access": "watch"})
        brief, record = await create_token(store, "alice", teams=["t"], expires_in=LIFETIME)
        assert record.expires_at is not None
        auth = {"Authorization": f"Bearer {brief}"}
        ws = await WsClient.connect(server.base_url, token=brief)
        async with (
            httpx.AsyncClient(base_url=server.base_url, timeout=HANG_BOUND_S, headers=auth) as http,
            sse(server.base_url, sid, params={"after": 0}, headers=auth) as events,
        ):
            opened = await http.post("/acp", json=INIT)
            assert opened.status_code == 200
            conn = {"Acp-Connection-Id": opened.headers["Acp-Connection-Id"]}
            messages: list[dict[str, Any]] = []
            async with http.stream("GET", "/acp", headers={**conn, "Accept": "text/event-stream"}) as stream:
                assert stream.status_code == 200
                async with asyncio.timeout(HANG_BOUND_S):  # a hang bound: expiry ends it by itself
                    async for line in stream.aiter_lines():
                        if line.startswith("data: "):
                            messages.append(json.loads(line.removeprefix("data: ")))
            assert messages[-1]["method"] == REVOKED
            await events.until(lambda f: f.get("event") == REVOKED, within=HANG_BOUND_S)
            async with asyncio.timeout(HANG_BOUND_S):
                await ws.ws.wait_closed()
            assert ws.ws.close_code == CloseCode.TOKEN_REVOKED
            # Refused from now on, like a revoked one; the lasting token still works.
            assert (
                await http.post("/rpc", json={**INIT, "method": "session/list", "params": {}})
            ).status_code == 401
        listed = {r.id: r for r in await store.list_tokens()}
        assert listed[record.id].revoked_at is None and listed[record.id].expires_at is not None
        assert (await bob.call("session/list", {}))["sessions"]
        await bob.close()


def test_lifetimes_are_read_as_durations() -> None:
    assert parse_duration("90s") == timedelta(seconds=90)
    assert parse_duration("30m") == timedelta(minutes=30)
    assert parse_duration("12h") == timedelta(hours=12)
    assert parse_duration(" 7d ") == timedelta(days=7)
    for bad in ("", "0h", "5", "1w", "-1d", "1.5h"):
        try:
            parse_duration(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} was accepted")


async def test_token_create_expires_in_from_the_command_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env.update(AGENTD_HOME=str(tmp_path / "home"), HOME=str(tmp_path))
    db = ["--database-url", f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"]

    async def cli(*args: str) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentd.cli", *args, *db, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        return int(proc.returncode or 0), out.decode(), err.decode()

    code, out, err = await cli("token", "create", "--principal", "carol", "--expires-in", "12h")
    assert code == 0, err
    assert out.strip().startswith("agentd_") and ", expiring 20" in err
    code, out, _ = await cli("token", "list")
    (line,) = out.strip().splitlines()
    assert line.split("\t")[4].startswith("active until 20"), line
    code, _, err = await cli("token", "create", "--principal", "carol", "--expires-in", "soon")
    assert code == 2 and "bad duration 'soon'" in err
