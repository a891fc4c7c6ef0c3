"""An HTTP-only client finishes a turn that needs a permission (issue 10, item 6): the
request appears on the SSE stream as a `permission_requested` event, and
`_agentd/permission/respond` over `POST /rpc` answers it — first answer wins across
transports, `_agentd/permission/resolved` goes to everyone, a bad answer changes nothing.
Runs on SQLite and Postgres."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from tests.support.frames import attach
from tests.support.permissions import RESOLVED, answer, asked, resolutions, write
from tests.support.polling import until
from tests.support.server import scripted
from tests.support.sse import sse

RESPOND = "_agentd/permission/respond"


async def rpc(http: httpx.AsyncClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    resp = await http.post("/rpc", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert resp.status_code == 200, resp.text
    return resp.json()  # type: ignore[no-any-return]


def is_event(frame: dict[str, Any], kind: str) -> bool:
    return frame.get("event") == "_agentd/event" and frame["data"]["kind"] == kind


def provider() -> Any:
    return scripted({"tool_calls": [write("call_w", "out.txt", "hello\n")]}, {"text": "Written."})


async def test_http_client_answers_a_permission_seen_on_sse(
    server_factory: Any, workspace: Path, db_url: str
) -> None:
    async with (
        server_factory(provider(), database_url=db_url) as server,
        httpx.AsyncClient(base_url=server.base_url, timeout=60) as http,
    ):
        sid = (await rpc(http, "session/new", {"cwd": str(workspace), "mcpServers": []}))["result"][
            "sessionId"
        ]
        async with sse(server.base_url, sid) as stream:
            prompt = asyncio.create_task(
                rpc(http, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
            )
            asked_frame = await stream.until(lambda f: is_event(f, "permission_requested"))
            event = asked_frame["data"]["event"]
            request_id = event["requestId"]
            assert event["toolCall"]["toolCallId"] == "call_w"
            options = {o["optionId"]: o["kind"] for o in event["options"]}
            allow = next(o for o, kind in options.items() if kind == "allow_once")
            assert not (workspace / "out.txt").exists()

            # A bad option is refused and changes nothing: the request is still pending.
            bad = await rpc(http, RESPOND, {"sessionId": sid, "requestId": request_id, "optionId": "nope"})
            assert bad["error"]["code"] == -32602, bad
            assert "allow_once" in bad["error"]["message"]
            assert not prompt.done()

            ok = await rpc(http, RESPOND, {"sessionId": sid, "requestId": request_id, "optionId": allow})
            assert ok["result"] == {"outcome": "selected", "optionId": allow}, ok
            resolved = await stream.until(lambda f: f.get("event") == RESOLVED)
            assert resolved["data"]["requestId"] == request_id
            assert resolved["data"]["outcome"] == "selected"

            done = await asyncio.wait_for(prompt, 60)
            assert done["result"]["stopReason"] == "end_turn", done
            assert (workspace / "out.txt").read_text() == "hello\n"

            # Answered already: a second answer is refused, clearly.
            late = await rpc(http, RESPOND, {"sessionId": sid, "requestId": request_id, "optionId": allow})
            assert late["error"]["code"] == -32602
            assert "no pending permission request" in late["error"]["message"]


async def test_http_answer_wins_over_a_websocket_client(server_factory: Any, workspace: Path) -> None:
    async with (
        server_factory(provider()) as server,
        httpx.AsyncClient(base_url=server.base_url, timeout=60) as http,
    ):
        sid = (await rpc(http, "session/new", {"cwd": str(workspace), "mcpServers": []}))["result"][
            "sessionId"
        ]
        editor = await server.client()
        try:
            await attach(editor, sid)
            prompt = asyncio.create_task(
                rpc(http, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
            )
            request = await asked(editor)
            request_id = request["params"]["_meta"]["agentd"]["requestId"]
            reject = next(o["optionId"] for o in request["params"]["options"] if o["kind"] == "reject_once")
            ok = await rpc(http, RESPOND, {"sessionId": sid, "requestId": request_id, "optionId": reject})
            assert "result" in ok, ok
            await until(lambda: bool(resolutions(editor, sid)))
            assert resolutions(editor, sid)[0]["requestId"] == request_id
            # The editor's late "allow" is ignored: the HTTP answer came first.
            allow = next(o["optionId"] for o in request["params"]["options"] if o["kind"] == "allow_once")
            await answer(editor, request, allow)
            done = await asyncio.wait_for(prompt, 60)
            # A rejection ends the turn (as from any client).
            assert done["result"]["_meta"]["agentd"]["reason"] == "permission_rejected", done
            assert not (workspace / "out.txt").exists(), "rejected over HTTP, yet written"
            assert len(resolutions(editor, sid)) == 1
        finally:
            await editor.close()


async def test_respond_to_someone_elses_session_looks_missing(server_factory: Any, workspace: Path) -> None:
    async with (
        server_factory(provider()) as server,
        httpx.AsyncClient(base_url=server.base_url, timeout=60) as http,
    ):
        missing = await rpc(http, RESPOND, {"sessionId": "sess_nope", "requestId": "perm_x", "optionId": "a"})
        assert missing["error"]["code"] == -32002, missing  # RESOURCE_NOT_FOUND, as for any session
        invalid = await rpc(http, RESPOND, {"sessionId": "sess_nope", "requestId": "", "optionId": "a"})
        assert invalid["error"]["code"] == -32602


async def test_http_cancelled_answer_is_a_local_cancelled_answer(
    server_factory: Any, workspace: Path
) -> None:
    """`outcome: cancelled` (what a client on another replica sends) ends the question as a
    WebSocket client's `cancelled` does: the tool call is refused, the turn cancelled."""
    async with (
        server_factory(provider()) as server,
        httpx.AsyncClient(base_url=server.base_url, timeout=60) as http,
    ):
        sid = (await rpc(http, "session/new", {"cwd": str(workspace), "mcpServers": []}))["result"][
            "sessionId"
        ]
        # Neither an option nor `cancelled`: refused, nothing pending is touched.
        no_option = await rpc(http, RESPOND, {"sessionId": sid, "requestId": "perm_x"})
        assert no_option["error"]["code"] == -32602 and "optionId" in no_option["error"]["message"]
        async with sse(server.base_url, sid) as stream:
            prompt = asyncio.create_task(
                rpc(http, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
            )
            asked_frame = await stream.until(lambda f: is_event(f, "permission_requested"))
            request_id = asked_frame["data"]["event"]["requestId"]
            ok = await rpc(http, RESPOND, {"sessionId": sid, "requestId": request_id, "outcome": "cancelled"})
            assert ok["result"] == {"outcome": "cancelled"}, ok
            resolved = await stream.until(lambda f: f.get("event") == RESOLVED)
            assert resolved["data"]["outcome"] == "cancelled"
            done = await asyncio.wait_for(prompt, 60)
            assert done["result"]["stopReason"] == "cancelled", done
            assert not (workspace / "out.txt").exists(), "cancelled, yet written"
            again = await rpc(
                http, RESPOND, {"sessionId": sid, "requestId": request_id, "outcome": "cancelled"}
            )
            assert again["error"]["code"] == -32602, again  # first answer wins
