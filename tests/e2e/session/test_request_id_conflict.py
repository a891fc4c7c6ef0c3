"""Issue 28 item 5: a `requestId` reused for *different* content is not a retry — it is
refused with its own code (-32030) and the first prompt's id in `data`, and changes nothing
(nothing queued, nothing run); the same content is still the idempotent retry it was. Over
the WebSocket, `POST /rpc` and the stdio bridge (`agentd acp --connect`), against a real
`agentd serve`."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx

from tests.support.client import WsClient, text_prompt
from tests.support.proc import agentd_serve, write_script

CONFLICT = -32030
ENQUEUE = "_agentd/prompt/enqueue"


def assert_conflict(response: dict[str, Any], request_id: str, first_prompt_id: str) -> None:
    assert "error" in response, response
    error = response["error"]
    assert error["code"] == CONFLICT, error
    assert error["data"]["requestId"] == request_id
    assert error["data"]["promptId"] == first_prompt_id
    assert error["data"]["retryable"] is False
    assert "different content" in error["message"]


async def logged_prompts(base_url: str, sid: str) -> list[str]:
    watcher = await WsClient.connect(base_url)
    try:
        await watcher.call("_agentd/session/attach", {"sessionId": sid, "afterSeq": 0})
        return [
            u["content"]["text"] for u in watcher.updates(sid) if u["sessionUpdate"] == "user_message_chunk"
        ]
    finally:
        await watcher.close()


async def test_a_reused_request_id_with_other_content_is_refused_over_ws_rpc_and_the_bridge(
    tmp_path: Path, workspace: Path
) -> None:
    script = write_script(tmp_path / "script.json", [{"text": "ok"}], loop=True)
    async with agentd_serve(tmp_path / "server", script=str(script)) as server:
        # -------------------------------------------------------------- WebSocket
        client = await WsClient.connect(server.base_url)
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        first = await client.call("session/prompt", text_prompt(sid, "hello", requestId="ws-1"))
        first_id = first["_meta"]["agentd"]["promptId"]
        again = await client.call("session/prompt", text_prompt(sid, "hello", requestId="ws-1"))
        assert again["_meta"]["agentd"]["promptId"] == first_id  # a retry: the original's answer
        assert_conflict(
            await client.request("session/prompt", text_prompt(sid, "something else", requestId="ws-1")),
            "ws-1",
            first_id,
        )
        assert_conflict(
            await client.request(ENQUEUE, text_prompt(sid, "hello!", requestId="ws-1")), "ws-1", first_id
        )
        # -------------------------------------------------------------- POST /rpc
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:

            async def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
                body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
                answer = await http.post("/rpc", json=body)
                assert answer.status_code == 200
                result: dict[str, Any] = answer.json()
                return result

            queued = await rpc(ENQUEUE, text_prompt(sid, "over http", requestId="rpc-1"))
            rpc_first = queued["result"]["promptId"]
            retried = await rpc(ENQUEUE, text_prompt(sid, "over http", requestId="rpc-1"))
            assert retried["result"]["promptId"] == rpc_first
            assert_conflict(
                await rpc(ENQUEUE, text_prompt(sid, "over HTTP", requestId="rpc-1")), "rpc-1", rpc_first
            )
            assert_conflict(
                await rpc("session/prompt", text_prompt(sid, "x", requestId="rpc-1")), "rpc-1", rpc_first
            )
        # -------------------------------------------------------------- the stdio bridge
        bridge_first = await through_the_bridge(server.base_url, sid, tmp_path)
        # Nothing a conflict carried was queued or run: each prompt is in the log once.
        queue = await client.call("_agentd/queue/list", {"sessionId": sid})
        assert queue["queue"] == []
        await client.close()
        logged = await logged_prompts(server.base_url, sid)
        assert logged == ["hello", "over http", "from the editor"], logged
        assert bridge_first


async def through_the_bridge(base_url: str, sid: str, tmp_path: Path) -> str:
    """An editor's JSON lines through `agentd acp --connect`: the first prompt under a
    requestId of its own, its retry, then the same requestId for another text."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env["AGENTD_HOME"] = str(tmp_path / "editor-home")
    url = base_url.replace("http://", "ws://") + "/acp"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentd.cli", "acp", "--connect", url,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, env=env,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    async def call(req_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": req_id, "method": method, "params": params}).encode() + b"\n"
        )
        await stdin.drain()
        async with asyncio.timeout(60):  # a hang bound, not a timing assertion
            while True:
                msg = json.loads(await stdout.readline())
                if msg.get("id") == req_id and "method" not in msg:
                    return dict(msg)

    try:
        await call(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        await call(2, "session/load", {"sessionId": sid, "cwd": "/", "mcpServers": []})
        first = await call(3, "session/prompt", text_prompt(sid, "from the editor", requestId="br-1"))
        first_id = str(first["result"]["_meta"]["agentd"]["promptId"])
        retried = await call(4, "session/prompt", text_prompt(sid, "from the editor", requestId="br-1"))
        assert retried["result"]["_meta"]["agentd"]["promptId"] == first_id
        assert_conflict(
            await call(5, "session/prompt", text_prompt(sid, "edited", requestId="br-1")), "br-1", first_id
        )
        return first_id
    finally:
        stdin.close()
        async with asyncio.timeout(30):
            await proc.wait()
