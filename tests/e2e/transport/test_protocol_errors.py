"""R-P4 over a real WebSocket (`GET /acp`): every bad message gets the right JSON-RPC
error, and the connection — and any session already on it — keeps working afterwards."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentd.protocol.jsonrpc import ErrorCode
from tests.support.client import WsClient, agent_text, text_prompt
from tests.support.server import scripted
from tests.support.session import new_session

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
RESOURCE_NOT_FOUND = -32002


def ok_provider() -> Any:
    return scripted({"text": "ok"}, loop=True)


async def exchange(client: WsClient, frame: str | bytes) -> Any:
    """Send one raw frame and return the reply nobody was waiting for."""
    if isinstance(frame, bytes):
        await client.ws.send(frame)
    else:
        await client.send_raw(frame)
    return await client.next_unmatched()


async def assert_still_usable(client: WsClient, session_id: str, cwd: Path) -> None:
    """The same connection answers a fresh call, and its existing session still runs a turn."""
    listed = await client.call("session/list", {})
    assert (session_id, str(cwd)) in [(s["sessionId"], s["cwd"]) for s in listed["sessions"]]
    before = len(client.updates(session_id))
    result = await client.call("session/prompt", text_prompt(session_id, "still there?"))
    assert result["stopReason"] == "end_turn"
    assert agent_text(client.updates(session_id)[before:]) == "ok"


def assert_invalid_params(error: dict[str, Any], path: str, fragment: str) -> None:
    assert error["code"] == INVALID_PARAMS
    assert error["message"].startswith(f"Invalid params: {path}: ")
    assert fragment in error["message"]
    data = error["data"]
    assert isinstance(data, list) and data
    for entry in data:
        assert set(entry) == {"path", "message"}
        assert isinstance(entry["path"], str) and isinstance(entry["message"], str) and entry["message"]
    first = data[0]
    assert first["path"] == path and fragment in first["message"]


# --------------------------------------------------------------------------- envelope


async def test_malformed_json_gets_parse_error_with_null_id_and_connection_stays_usable(
    server_factory, workspace: Path
):
    async with server_factory(ok_provider()) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        reply = await exchange(client, '{"jsonrpc": "2.0", "id": 1, "method": "session/list", ')

        assert reply["jsonrpc"] == "2.0"
        assert reply["id"] is None
        assert reply["error"]["code"] == PARSE_ERROR
        assert reply["error"]["message"].startswith("Parse error")
        assert "result" not in reply
        await assert_still_usable(client, sid, workspace)
        await client.close()


@pytest.mark.parametrize("frame", ["42", '"x"', "null", "true", "3.5"])
async def test_json_that_is_not_an_object_is_an_invalid_request(server_factory, workspace: Path, frame: str):
    async with server_factory(ok_provider()) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        reply = await exchange(client, frame)

        assert reply == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": INVALID_REQUEST,
                "message": "Invalid Request: a JSON-RPC message must be an object",
            },
        }
        await assert_still_usable(client, sid, workspace)
        await client.close()


@pytest.mark.parametrize(
    ("message", "expected_id", "bad_path"),
    [
        ({"id": 7, "method": "session/list", "params": {}}, 7, "jsonrpc"),
        ({"jsonrpc": "2.0", "id": "no-method", "params": {}}, "no-method", "method"),
        ({"jsonrpc": "1.0", "id": 9, "method": "session/list", "params": {}}, 9, "jsonrpc"),
        ({"jsonrpc": "2.0", "id": 10, "method": 5}, 10, "method"),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "session/list", "params": {}}, None, "id.int"),
    ],
    ids=["missing-jsonrpc", "missing-method", "wrong-version", "method-not-a-string", "float-id"],
)
async def test_object_that_is_not_a_valid_request_is_an_invalid_request(
    server_factory, workspace: Path, message: dict[str, Any], expected_id: Any, bad_path: str
):
    async with server_factory(ok_provider()) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        reply = await exchange(client, json.dumps(message))

        assert reply["id"] == expected_id
        assert reply["error"]["code"] == INVALID_REQUEST
        assert reply["error"]["message"].startswith("Invalid Request")
        assert bad_path in [d["path"] for d in reply["error"]["data"]]
        await assert_still_usable(client, sid, workspace)
        await client.close()


async def test_unknown_method_is_method_not_found_naming_the_method(server_factory, workspace: Path):
    async with server_factory(ok_provider()) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        reply = await client.request("session/frobnicate", {"sessionId": sid}, id="frob")

        assert reply == {
            "jsonrpc": "2.0",
            "id": "frob",
            "error": {"code": METHOD_NOT_FOUND, "message": "Method not found: session/frobnicate"},
        }
        await assert_still_usable(client, sid, workspace)
        await client.close()


async def test_binary_frame_is_an_invalid_request_and_connection_stays_usable(
    server_factory, workspace: Path
):
    async with server_factory(ok_provider()) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        reply = await exchange(client, b'{"jsonrpc": "2.0", "id": 5, "method": "session/list", "params": {}}')

        assert reply["id"] is None
        assert reply["error"] == {"code": INVALID_REQUEST, "message": "binary frames are not supported"}
        await assert_still_usable(client, sid, workspace)
        await client.close()


# --------------------------------------------------------------------------- params


INVALID_PARAMS_CASES = [
    ("session/new", {"cwd": "relative/dir", "mcpServers": []}, "cwd", "cwd must be an absolute path"),
    ("session/new", {"mcpServers": []}, "cwd", "Field required"),
    ("session/new", {"cwd": 42, "mcpServers": []}, "cwd", "Input should be a valid string"),
    ("session/new", {"cwd": "/tmp", "mcpServers": "none"}, "mcpServers", "Input should be a valid list"),
    ("session/prompt", {"sessionId": "$SID", "prompt": []}, "prompt", "at least 1 item"),
    ("session/prompt", {"sessionId": "$SID", "prompt": "hi"}, "prompt", "Input should be a valid list"),
    ("session/prompt", {"sessionId": "$SID"}, "prompt", "Field required"),
    (
        "session/prompt",
        {"sessionId": 17, "prompt": [{"type": "text", "text": "x"}]},
        "sessionId",
        "valid string",
    ),
    ("session/prompt", {"sessionId": "$SID", "prompt": [{"type": "bogus"}]}, "prompt.0", "'bogus'"),
    ("session/prompt", {"sessionId": "$SID", "prompt": [{"type": "text"}]}, "prompt.0.text.text", "required"),
    ("session/set_mode", {"sessionId": "$SID"}, "modeId", "Field required"),
    ("initialize", {"protocolVersion": "one"}, "protocolVersion", "valid integer"),
]


@pytest.mark.parametrize(
    ("method", "params", "path", "fragment"),
    INVALID_PARAMS_CASES,
    ids=[f"{m}:{p}:{f}" for m, _, p, f in INVALID_PARAMS_CASES],
)
async def test_invalid_params_get_readable_message_and_data_list(
    server_factory, workspace: Path, method: str, params: dict[str, Any], path: str, fragment: str
):
    async with server_factory(ok_provider()) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        params = {k: (sid if v == "$SID" else v) for k, v in params.items()}

        reply = await client.request(method, params)

        assert "result" not in reply
        assert_invalid_params(reply["error"], path, fragment)
        # Nothing ran on the session: the provider was never called.
        assert server.provider.requests == []
        await assert_still_usable(client, sid, workspace)
        await client.close()


async def test_several_invalid_fields_are_all_listed_in_data(server_factory, workspace: Path):
    async with server_factory(ok_provider()) as server:
        client = await server.client()

        reply = await client.request("session/prompt", {"sessionId": 1, "prompt": []})

        error = reply["error"]
        assert error["code"] == INVALID_PARAMS
        assert error["message"].endswith("(and 1 more)")
        assert sorted(d["path"] for d in error["data"]) == ["prompt", "sessionId"]
        await client.close()


async def test_params_that_are_not_an_object_are_invalid_params(server_factory, workspace: Path):
    async with server_factory(ok_provider()) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        reply = await exchange(
            client,
            json.dumps({"jsonrpc": "2.0", "id": "arr", "method": "session/new", "params": [str(workspace)]}),
        )

        assert reply["id"] == "arr"
        assert reply["error"]["code"] == INVALID_PARAMS
        assert reply["error"]["message"] == "Invalid params: expected an object"
        await assert_still_usable(client, sid, workspace)
        await client.close()


async def test_params_may_be_omitted_when_every_field_is_optional(server_factory, workspace: Path):
    async with server_factory(ok_provider()) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        omitted = await client.request("session/list")  # no "params" member at all

        assert omitted.get("error") is None
        assert [s["sessionId"] for s in omitted["result"]["sessions"]] == [sid]
        # And a method with required fields names them in `data` like any other -32602.
        missing = await client.request("session/new")
        assert_invalid_params(missing["error"], "cwd", "Field required")
        await client.close()


# --------------------------------------------------------------------------- initialize first


async def test_request_before_initialize_is_rejected_then_initialize_still_works(
    server_factory, workspace: Path
):
    async with server_factory(ok_provider()) as server:
        client = await WsClient.connect(server.base_url, initialize=False)

        early_list = await client.request("session/list", {})
        early_new = await client.request("session/new", {"cwd": str(workspace), "mcpServers": []})
        early_unknown = await client.request("no/such/method", {})

        for reply in (early_list, early_new, early_unknown):
            assert reply["error"] == {
                "code": INVALID_REQUEST,
                "message": "Invalid Request: `initialize` must be the first request",
            }
        # Nothing was created by the rejected session/new.
        assert server.provider.requests == []

        init = await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        assert init["protocolVersion"] == 1
        assert init["agentInfo"]["name"] == "agentd"

        assert (await client.call("session/list", {}))["sessions"] == []
        sid = await new_session(client, workspace)
        await assert_still_usable(client, sid, workspace)
        await client.close()


async def test_failed_initialize_leaves_connection_uninitialized_but_open(server_factory, workspace: Path):
    async with server_factory(ok_provider()) as server:
        client = await WsClient.connect(server.base_url, initialize=False)

        bad = await client.request("initialize", {"protocolVersion": -1})
        assert_invalid_params(bad["error"], "protocolVersion", "greater than or equal to 0")
        still_early = await client.request("session/list", {})
        assert still_early["error"]["code"] == INVALID_REQUEST

        await client.call("initialize", {"protocolVersion": 1})
        assert (await client.call("session/list", {}))["sessions"] == []
        await client.close()


# --------------------------------------------------------------------------- ids


@pytest.mark.parametrize("req_id", [0, -1, -(2**31), 2**53, "", "0", "req-7", "ünïcödé"])
async def test_request_ids_come_back_unchanged(server_factory, workspace: Path, req_id: Any):
    async with server_factory(ok_provider()) as server:
        client = await server.client()

        ok = await exchange(
            client, json.dumps({"jsonrpc": "2.0", "id": req_id, "method": "session/list", "params": {}})
        )
        err = await exchange(
            client, json.dumps({"jsonrpc": "2.0", "id": req_id, "method": "nope", "params": {}})
        )

        assert ok == {"jsonrpc": "2.0", "id": req_id, "result": {"sessions": []}}
        assert err["id"] == req_id and type(err["id"]) is type(req_id)
        assert err["error"]["code"] == METHOD_NOT_FOUND
        await client.close()


async def test_integer_and_string_ids_with_the_same_digits_are_distinct(server_factory, workspace: Path):
    async with server_factory(ok_provider()) as server:
        client = await server.client()

        replies = await exchange(
            client,
            json.dumps(
                [
                    {"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}},
                    {"jsonrpc": "2.0", "id": "1", "method": "nope"},
                ]
            ),
        )

        by_type = {type(r["id"]): r for r in replies}
        assert set(by_type) == {int, str}
        assert by_type[int]["result"] == {"sessions": []}
        assert by_type[str]["error"]["code"] == METHOD_NOT_FOUND
        await client.close()


async def test_session_prompt_answers_with_the_callers_id(server_factory, workspace: Path):
    async with server_factory(ok_provider()) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        reply = await client.request("session/prompt", text_prompt(sid, "hi"), id=0)

        assert reply["id"] == 0
        assert reply["result"]["stopReason"] == "end_turn"
        await client.close()


# --------------------------------------------------------------------------- notifications and batches


async def test_notification_with_unknown_method_gets_no_response(server_factory, workspace: Path):
    async with server_factory(ok_provider()) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        # The commands follow `session/new`'s answer (maybe in a write of their own): counted
        # before the notifications, so the next frame can only be an answer to one of them.
        await client.wait_notification(
            lambda m: (
                m.get("params", {}).get("update", {}).get("sessionUpdate") == "available_commands_update"
            )
        )
        seen = len(client.frames)

        await client.notify("no/such/notification", {"sessionId": sid})
        await client.notify("session/cancel", {"wrong": "params"})  # invalid params, still no reply
        reply = await client.request("session/list", {}, id="after-notes")

        # The very next frame the server sent is the request's response.
        assert client.frames[seen] == reply
        assert reply["id"] == "after-notes" and "result" in reply
        # A second round trip is the barrier: had a notification been answered, that answer
        # would sit between the two replies.
        second = await client.request("session/list", {}, id="barrier")
        assert client.frames[seen:] == [reply, second]
        assert client._unmatched.empty()
        await assert_still_usable(client, sid, workspace)
        await client.close()


async def test_batch_gets_an_array_of_responses_without_the_notifications(server_factory, workspace: Path):
    async with server_factory(ok_provider()) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        replies = await exchange(
            client,
            json.dumps(
                [
                    {"jsonrpc": "2.0", "id": "b-list", "method": "session/list", "params": {}},
                    {"jsonrpc": "2.0", "id": "b-unknown", "method": "nope", "params": {}},
                    {"jsonrpc": "2.0", "method": "also/nope", "params": {}},
                    {"jsonrpc": "2.0", "id": "b-bad", "method": "session/new", "params": {"cwd": "rel"}},
                    42,
                ]
            ),
        )

        assert isinstance(replies, list) and len(replies) == 4
        by_id = {r["id"]: r for r in replies}
        assert set(by_id) == {"b-list", "b-unknown", "b-bad", None}
        assert [s["sessionId"] for s in by_id["b-list"]["result"]["sessions"]] == [sid]
        assert by_id["b-unknown"]["error"]["code"] == METHOD_NOT_FOUND
        assert_invalid_params(by_id["b-bad"]["error"], "cwd", "absolute")
        assert by_id[None]["error"]["code"] == INVALID_REQUEST
        await assert_still_usable(client, sid, workspace)
        await client.close()


async def test_empty_batch_is_a_single_invalid_request(server_factory, workspace: Path):
    async with server_factory(ok_provider()) as server:
        client = await server.client()

        reply = await exchange(client, "[]")

        assert reply == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": INVALID_REQUEST, "message": "empty batch"},
        }
        assert (await client.call("session/list", {}))["sessions"] == []
        await client.close()


async def test_batch_of_only_notifications_gets_no_response(server_factory, workspace: Path):
    async with server_factory(ok_provider()) as server:
        client = await server.client()
        seen = len(client.frames)

        await client.send_raw(
            json.dumps([{"jsonrpc": "2.0", "method": "nope"}, {"jsonrpc": "2.0", "method": "nope/again"}])
        )
        reply = await client.request("session/list", {}, id="next")

        assert client.frames[seen] == reply
        assert reply["result"] == {"sessions": []}
        await client.close()


# --------------------------------------------------------------------------- session-level errors


async def test_prompt_for_unknown_session_is_resource_not_found(server_factory, workspace: Path):
    async with server_factory(ok_provider()) as server:
        client = await server.client()
        sid = await new_session(client, workspace)

        reply = await client.request("session/prompt", text_prompt("sess_does_not_exist", "hello?"))

        assert reply["error"]["code"] == RESOURCE_NOT_FOUND
        assert "sess_does_not_exist" in reply["error"]["message"]
        assert server.provider.requests == []
        await assert_still_usable(client, sid, workspace)
        await client.close()


async def test_set_mode_for_unknown_session_is_resource_not_found(server_factory, workspace: Path):
    async with server_factory(ok_provider()) as server:
        client = await server.client()

        reply = await client.request("session/set_mode", {"sessionId": "sess_nope", "modeId": "plan"})

        assert reply["error"]["code"] == RESOURCE_NOT_FOUND
        assert "sess_nope" in reply["error"]["message"]
        await client.close()


async def test_set_mode_with_unknown_mode_is_invalid_params_and_mode_is_unchanged(
    server_factory, workspace: Path
):
    async with server_factory(ok_provider()) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        await client.call("session/set_mode", {"sessionId": sid, "modeId": "plan"})
        await client.wait_notification(
            lambda n: n["params"].get("update", {}).get("sessionUpdate") == "current_mode_update"
        )
        mode_updates = [u for u in client.updates(sid) if u["sessionUpdate"] == "current_mode_update"]
        assert mode_updates == [{"sessionUpdate": "current_mode_update", "currentModeId": "plan"}]

        reply = await client.request("session/set_mode", {"sessionId": sid, "modeId": "yolo"})

        assert reply["error"]["code"] == INVALID_PARAMS
        assert "'yolo'" in reply["error"]["message"]
        for mode in ("default", "accept_edits", "bypass", "plan"):
            assert mode in reply["error"]["message"]
        # No mode change was announced for the rejected call...
        await assert_still_usable(client, sid, workspace)
        after = [u for u in client.updates(sid) if u["sessionUpdate"] == "current_mode_update"]
        assert after == mode_updates
        # ...and a fresh connection loading the session sees the mode set before it.
        other = await server.client()
        loaded = await other.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        assert loaded["modes"]["currentModeId"] == "plan"
        await other.close()
        await client.close()


async def test_new_session_cwd_that_does_not_exist_is_invalid_params(server_factory, workspace: Path):
    async with server_factory(ok_provider()) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        missing = workspace / "no" / "such" / "dir"
        a_file = workspace / "file.txt"
        a_file.write_text("not a directory\n")

        for cwd in (missing, a_file):
            reply = await client.request("session/new", {"cwd": str(cwd), "mcpServers": []})
            assert reply["error"]["code"] == INVALID_PARAMS
            assert reply["error"]["message"] == f"Invalid params: cwd: {cwd} is not an existing directory"

        assert [s["sessionId"] for s in (await client.call("session/list", {}))["sessions"]] == [sid]
        await assert_still_usable(client, sid, workspace)
        await client.close()


async def test_cwd_outside_workspace_root_is_denied(server_factory, workspace: Path, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    inside = workspace / "project"
    inside.mkdir()
    escape_link = workspace / "escape"
    escape_link.symlink_to(outside, target_is_directory=True)

    async with server_factory(ok_provider(), workspace_root=workspace) as server:
        client = await server.client()
        sid = await new_session(client, inside)

        for cwd in (outside, workspace / ".." / "outside", escape_link, Path("/")):
            reply = await client.request("session/new", {"cwd": str(cwd), "mcpServers": []})
            assert reply["error"]["code"] == ErrorCode.WORKSPACE_DENIED == -32015, cwd
            assert reply["error"]["message"] == f"cwd {cwd} is outside the workspace root {workspace}"

        listed = await client.call("session/list", {})
        assert [(s["sessionId"], s["cwd"]) for s in listed["sessions"]] == [(sid, str(inside))]
        await assert_still_usable(client, sid, inside)
        await client.close()


# --------------------------------------------------------------------------- frame size


async def test_frame_larger_than_max_frame_bytes_is_rejected_and_connection_stays_usable(
    server_factory, workspace: Path
):
    async with server_factory(ok_provider(), max_frame_bytes=2048) as server:
        client = await server.client()
        sid = await new_session(client, workspace)
        big = json.dumps(text_prompt(sid, "x" * 4000), separators=(",", ":"))
        frame = f'{{"jsonrpc":"2.0","id":"big","method":"session/prompt","params":{big}}}'
        assert len(frame.encode()) > 2048

        reply = await exchange(client, frame)

        assert reply["id"] is None
        assert reply["error"] == {"code": INVALID_REQUEST, "message": "frame larger than 2048 bytes"}
        assert server.provider.requests == []  # the oversized prompt never ran
        await assert_still_usable(client, sid, workspace)
        await client.close()


async def test_max_frame_bytes_counts_bytes_not_characters(server_factory, workspace: Path):
    async with server_factory(ok_provider(), max_frame_bytes=1000) as server:
        client = await server.client()
        frame = json.dumps(
            {"jsonrpc": "2.0", "id": "wide", "method": "session/list", "params": {"cwd": "/" + "é" * 600}},
            ensure_ascii=False,
        )
        assert len(frame) < 1000 < len(frame.encode())

        reply = await exchange(client, frame)

        assert reply["error"] == {"code": INVALID_REQUEST, "message": "frame larger than 1000 bytes"}
        await client.close()
