"""One owner per database (issue 29, item 7): a local `agentd acp` on a SQLite file a live
`agentd serve` holds does not run a second set of sessions beside it — it relays to that
server, as `agentd acp --connect` would, and says so once on stderr; a second local
`agentd acp` beside one that serves no address refuses in one line. Real processes, the
official ACP SDK as the editor."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
from acp import text_block

from tests.support.acp_stdio import editor
from tests.support.cli import agentd, clean_env
from tests.support.proc import agentd_process, free_port, wait_healthy

SCRIPT = {"loop": True, "steps": [{"text": "served by the server"}]}


async def test_acp_on_a_database_a_server_holds_relays_to_that_server(
    tmp_path: Path, workspace: Path
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    home = tmp_path / "home"  # the same AGENTD_HOME: the same SQLite file
    env = clean_env(tmp_path, AGENTD_HOME=str(home), AGENTD_PROVIDER="scripted", AGENTD_SCRIPT=str(script))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    async with agentd_process(["serve", "--port", str(port)], env=env, log=log) as server:
        await wait_healthy(base, server, log)
        async with editor(home, script) as (conn, client, _recorder, process):
            sid = (await conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id
            done = await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("hi")]), 60)
            assert done.stop_reason == "end_turn"
            assert client.agent_text(sid) == "served by the server"
            # The session lives in the server: it is one of the server's live sessions.
            async with httpx.AsyncClient(base_url=base) as http:
                listed = (
                    await http.post("/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "session/list"})
                ).json()
            assert sid in [s["sessionId"] for s in listed["result"]["sessions"]]
        assert process.stderr is not None
        stderr = (await asyncio.wait_for(process.stderr.read(), 30)).decode()
    relayed = [line for line in stderr.splitlines() if "relaying to" in line]
    assert relayed == [
        f"agentd: the database is held by a running agentd; relaying to ws://127.0.0.1:{port}/acp"
    ]


async def test_a_second_local_acp_beside_one_that_serves_nothing_refuses(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    home = tmp_path / "home"
    async with editor(home, script) as (conn, *_):
        await conn.list_sessions()  # the first one runs (and holds the file)
        env = clean_env(
            tmp_path, AGENTD_HOME=str(home), AGENTD_PROVIDER="scripted", AGENTD_SCRIPT=str(script)
        )
        run = await agentd("acp", env=env, cwd=tmp_path)
    assert run.code == 2, run.text
    lines = run.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentd: error: "), run.err
    assert "in use by another agentd process" in lines[0] and "agentd serve` and --connect" in lines[0]
    assert "Traceback" not in run.text
