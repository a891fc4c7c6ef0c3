"""R-P1 / R-P4 over HTTP: `POST /rpc` (one JSON-RPC request or a batch, no `initialize`
needed), `GET /healthz`, `GET /readyz`, `GET /openapi.json` — on a real socket."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.client import agent_text, text_prompt
from tests.support.server import scripted

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
RESOURCE_NOT_FOUND = -32002


def ok_provider() -> Any:
    return scripted({"text": "ok"}, loop=True)


def rpc(method: str, params: dict[str, Any] | None = None, id: Any = 1) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


async def post(http: httpx.AsyncClient, body: Any) -> httpx.Response:
    if isinstance(body, (str, bytes)):
        return await http.post("/rpc", content=body, headers={"content-type": "application/json"})
    return await http.post("/rpc", json=body)


# --------------------------------------------------------------------------- POST /rpc


async def test_session_new_then_list_over_http_needs_no_initialize(server_factory, workspace: Path, db_url):
    async with server_factory(ok_provider(), database_url=db_url) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            created = await post(http, rpc("session/new", {"cwd": str(workspace), "mcpServers": []}, id=1))
            assert created.status_code == 200
            body = created.json()
            assert body["jsonrpc"] == "2.0" and body["id"] == 1 and "error" not in body
            sid = body["result"]["sessionId"]
            assert isinstance(sid, str) and sid
            assert body["result"]["modes"]["currentModeId"] == "default"
            assert {m["id"] for m in body["result"]["modes"]["availableModes"]} == {
                "default",
                "accept_edits",
                "bypass",
                "plan",
            }

            listed = await post(http, rpc("session/list", {}, id=2))

            assert listed.status_code == 200
            sessions = listed.json()["result"]["sessions"]
            assert [(s["sessionId"], s["cwd"]) for s in sessions] == [(sid, str(workspace))]


async def test_prompt_over_http_runs_a_turn_and_returns_end_turn(server_factory, workspace: Path, db_url):
    provider = scripted({"text": "Hello from the turn."})
    async with server_factory(provider, database_url=db_url) as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
            sid = (await post(http, rpc("session/new", {"cwd": str(workspace)}))).json()["result"][
                "sessionId"
            ]

            resp = await post(http, rpc("session/prompt", text_prompt(sid, "say hello"), id="p-1"))

            assert resp.status_code == 200
            body = resp.json()
            assert body["id"] == "p-1"
            result = body["result"]
            assert result["stopReason"] == "end_turn"
            meta = result["_meta"]["agentd"]
            assert meta["outcome"] == "completed"
            assert isinstance(meta["promptId"], str) and meta["promptId"]
            # The model really saw the prompt.
            assert len(provider.requests) == 1
            users = [m.content for m in provider.requests[0].messages if m.role == "user"]
            assert users and "say hello" in users[-1]

        # The turn is durable: a WebSocket client loading the session gets it replayed.
        client = await server.client()
        await client.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        assert agent_text(client.updates(sid)) == "Hello from the turn."
        await client.close()


async def test_malformed_body_is_a_parse_error(server_factory):
    async with server_factory(ok_provider()) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            for body in ('{"jsonrpc": "2.0", "id": 1, "method": ', "", b"\xff\xfe not utf-8"):
                resp = await post(http, body)

                assert resp.status_code == 200
                reply = resp.json()
                assert reply["jsonrpc"] == "2.0" and reply["id"] is None
                assert reply["error"]["code"] == PARSE_ERROR
                assert reply["error"]["message"].startswith("Parse error")


async def test_body_that_is_not_a_request_object_is_an_invalid_request(server_factory):
    async with server_factory(ok_provider()) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            scalar = (await post(http, "42")).json()
            no_method = (await post(http, {"jsonrpc": "2.0", "id": 3})).json()

            assert scalar == {
                "jsonrpc": "2.0",
                "id": None,
                "error": {
                    "code": INVALID_REQUEST,
                    "message": "Invalid Request: a JSON-RPC message must be an object",
                },
            }
            assert no_method["id"] == 3
            assert no_method["error"]["code"] == INVALID_REQUEST
            assert [d["path"] for d in no_method["error"]["data"]] == ["method"]


async def test_unknown_method_is_method_not_found(server_factory):
    async with server_factory(ok_provider()) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            resp = await post(http, rpc("session/teleport", {}, id=11))

            assert resp.status_code == 200
            assert resp.json() == {
                "jsonrpc": "2.0",
                "id": 11,
                "error": {"code": METHOD_NOT_FOUND, "message": "Method not found: session/teleport"},
            }


async def test_invalid_params_are_described_in_data(server_factory, workspace: Path):
    async with server_factory(ok_provider()) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            relative = (await post(http, rpc("session/new", {"cwd": "work/dir"}))).json()["error"]
            empty_prompt = (await post(http, rpc("session/prompt", {"sessionId": "s", "prompt": []}))).json()[
                "error"
            ]
            missing_dir = (await post(http, rpc("session/new", {"cwd": str(workspace / "gone")}))).json()[
                "error"
            ]

            assert relative == {
                "code": INVALID_PARAMS,
                "message": "Invalid params: cwd: cwd must be an absolute path",
                "data": [{"path": "cwd", "message": "cwd must be an absolute path"}],
            }
            assert empty_prompt["code"] == INVALID_PARAMS
            assert empty_prompt["message"].startswith("Invalid params: prompt: ")
            assert [d["path"] for d in empty_prompt["data"]] == ["prompt"]
            assert missing_dir["code"] == INVALID_PARAMS
            assert (
                missing_dir["message"]
                == f"Invalid params: cwd: {workspace / 'gone'} is not an existing directory"
            )
            # None of that created a session.
            listed = (await post(http, rpc("session/list", {}))).json()["result"]
            assert listed == {"sessions": []}


async def test_prompt_for_unknown_session_is_resource_not_found(server_factory):
    async with server_factory(ok_provider()) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            reply = (await post(http, rpc("session/prompt", text_prompt("sess_missing", "hi")))).json()

            assert reply["error"]["code"] == RESOURCE_NOT_FOUND
            assert "sess_missing" in reply["error"]["message"]
            assert server.provider.requests == []


@pytest.mark.parametrize("req_id", [0, -7, "", "abc", "1"])
async def test_ids_come_back_unchanged(server_factory, req_id: Any):
    async with server_factory(ok_provider()) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            ok = (await post(http, rpc("session/list", {}, id=req_id))).json()
            err = (await post(http, rpc("nope", {}, id=req_id))).json()

            assert ok == {"jsonrpc": "2.0", "id": req_id, "result": {"sessions": []}}
            assert err["id"] == req_id and type(err["id"]) is type(req_id)


async def test_notification_gets_204_with_empty_body(server_factory, workspace: Path):
    async with server_factory(ok_provider()) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            for note in (
                {"jsonrpc": "2.0", "method": "no/such/method", "params": {}},
                {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "sess_missing"}},
                {"jsonrpc": "2.0", "method": "session/new", "params": {"cwd": str(workspace)}},
            ):
                resp = await post(http, note)

                assert resp.status_code == 204, note
                assert resp.content == b""
            # The notification-form session/new still ran (it just has no reply).
            listed = (await post(http, rpc("session/list", {}))).json()["result"]["sessions"]
            assert [s["cwd"] for s in listed] == [str(workspace)]


async def test_batch_gets_a_list_of_responses(server_factory, workspace: Path):
    async with server_factory(ok_provider()) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            resp = await post(
                http,
                [
                    rpc("session/new", {"cwd": str(workspace)}, id="new"),
                    rpc("nope", {}, id="unknown"),
                    {"jsonrpc": "2.0", "method": "also/nope"},
                    rpc("session/new", {"cwd": "rel"}, id="bad"),
                    7,
                ],
            )

            assert resp.status_code == 200
            replies = resp.json()
            assert isinstance(replies, list) and len(replies) == 4
            by_id = {r["id"]: r for r in replies}
            assert set(by_id) == {"new", "unknown", "bad", None}
            assert by_id["new"]["result"]["sessionId"]
            assert by_id["unknown"]["error"]["code"] == METHOD_NOT_FOUND
            assert by_id["bad"]["error"]["code"] == INVALID_PARAMS
            assert by_id[None]["error"]["code"] == INVALID_REQUEST


async def test_batch_edge_cases_empty_and_only_notifications(server_factory):
    async with server_factory(ok_provider()) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            empty = await post(http, [])
            only_notes = await post(
                http, [{"jsonrpc": "2.0", "method": "a"}, {"jsonrpc": "2.0", "method": "b"}]
            )

            assert empty.status_code == 200
            assert empty.json() == {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": INVALID_REQUEST, "message": "empty batch"},
            }
            assert only_notes.status_code == 204 and only_notes.content == b""


async def test_session_load_over_http_says_it_needs_a_websocket(server_factory, workspace: Path):
    async with server_factory(ok_provider()) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            sid = (await post(http, rpc("session/new", {"cwd": str(workspace)}))).json()["result"][
                "sessionId"
            ]

            reply = (
                await post(
                    http, rpc("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
                )
            ).json()

            assert reply["error"] == {
                "code": INVALID_REQUEST,
                "message": "session/load needs a WebSocket connection (GET /acp)",
            }


async def test_body_larger_than_max_frame_bytes_is_rejected(server_factory, workspace: Path):
    async with server_factory(ok_provider(), max_frame_bytes=1000) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            body = json.dumps(rpc("session/list", {"cwd": "/" + "x" * 2000}))

            resp = await post(http, body)

            assert resp.status_code == 413
            assert resp.json() == {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": INVALID_REQUEST, "message": "request body too large"},
            }
            # The server is fine afterwards.
            assert (await post(http, rpc("session/list", {}))).json()["result"] == {"sessions": []}


# --------------------------------------------------------------------------- health and docs


async def test_healthz_is_ok(server_factory):
    async with server_factory(ok_provider()) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            resp = await http.get("/healthz")

            assert resp.status_code == 200
            assert resp.json() == {"status": "ok"}


async def test_readyz_reports_database_ok_and_migrations_at_head(server_factory, db_url):
    async with server_factory(ok_provider(), database_url=db_url) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            resp = await http.get("/readyz")

            assert resp.status_code == 200
            body = resp.json()
            assert body["status"] == "ok"
            assert body["database"] == "ok"
            assert isinstance(body["head"], str) and body["head"]
            assert body["migration"] == body["head"]


async def test_openapi_lists_the_http_routes(server_factory):
    async with server_factory(ok_provider()) as server:
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            resp = await http.get("/openapi.json")

            assert resp.status_code == 200
            spec = resp.json()
            assert spec["info"]["title"] == "agentd"
            paths = spec["paths"]
            assert {"/rpc", "/healthz", "/readyz"} <= set(paths)
            assert "post" in paths["/rpc"]
            assert "get" in paths["/healthz"]
            assert "get" in paths["/readyz"]
            # `GET /` is a web page, not JSON.
            page = paths["/"]["get"]["responses"]["200"]["content"]
            assert set(page) == {"text/html"}
            # `/rpc`'s body is described: one JSON-RPC message or a batch of them.
            rpc_op = paths["/rpc"]["post"]
            body = rpc_op["requestBody"]["content"]["application/json"]
            one, batch = body["schema"]["oneOf"]
            assert one["required"] == ["jsonrpc", "method"] and batch["type"] == "array"
            assert body["example"]["method"] == "session/new"
            assert {"200", "204", "401", "413"} <= set(rpc_op["responses"])
            assert "422" not in rpc_op["responses"]
