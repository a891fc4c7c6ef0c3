"""Sessions over the raw WebSocket client: `session/list` paging, `session/load` replay and
live attach, and `session/set_mode` persistence."""

from __future__ import annotations

import asyncio
import base64
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.acp_schema import AcpValidator
from tests.support.client import RpcFailed, WsClient, agent_text, allow, text_prompt
from tests.support.server import scripted
from tests.support.session import new_session, served_session

INVALID_PARAMS = -32602


def assert_frames_valid(*clients: WsClient) -> None:
    validator = AcpValidator.default()
    for client in clients:
        assert client.frames
        for frame in client.frames:
            validator.assert_valid_agent_frame(frame, client.sent_methods)


def texts_by_message(
    updates: list[dict[str, Any]], kind: str = "agent_message_chunk"
) -> list[tuple[str, str]]:
    """(messageId, joined text) per message, in order of first appearance."""
    joined: dict[str, str] = {}
    for u in updates:
        if u["sessionUpdate"] == kind:
            joined[u["messageId"]] = joined.get(u["messageId"], "") + u["content"]["text"]
    return list(joined.items())


def skeleton(updates: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The conversation's shape: messages (text joined per messageId), tool calls and their
    status changes, in order. Streaming granularity and progress-only updates drop out."""
    out: list[tuple[Any, ...]] = []
    for u in updates:
        kind = u["sessionUpdate"]
        if kind in ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk"):
            key = (kind, u.get("messageId"))
            if out and out[-1][:2] == key:
                out[-1] = (*key, out[-1][2] + u["content"]["text"])
            else:
                out.append((*key, u["content"]["text"]))
        elif kind == "tool_call":
            out.append((kind, u["toolCallId"], u["status"]))
        elif kind == "tool_call_update" and "status" in u:
            out.append((kind, u["toolCallId"], u["status"]))
    return out


def replayed_updates(client: WsClient, session_id: str) -> list[dict[str, Any]]:
    """The `session/update`s a client received before its `session/load` response."""
    load_ids = [i for i, m in client.sent_methods.items() if m == "session/load"]
    at = next(
        i
        for i, f in enumerate(client.frames)
        if isinstance(f, dict) and "method" not in f and f.get("id") == load_ids[-1]
    )
    return [
        f["params"]["update"]
        for f in client.frames[:at]
        if isinstance(f, dict)
        and f.get("method") == "session/update"
        and f["params"]["sessionId"] == session_id
        and f["params"]["update"]["sessionUpdate"] != "available_commands_update"
    ]


# ---------------------------------------------------------------------------- session/list


async def _http_rpc(http: httpx.AsyncClient, method: str, params: dict[str, Any], id: int) -> Any:
    resp = await http.post("/rpc", json={"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    resp.raise_for_status()
    body = resp.json()
    assert "error" not in body, body
    return body["result"]


async def _list_all(client: WsClient, **params: Any) -> list[list[dict[str, Any]]]:
    """Every page of `session/list` (following nextCursor); asserts the cursor rules."""
    pages: list[list[dict[str, Any]]] = []
    cursor: str | None = None
    while True:
        req = dict(params)
        if cursor is not None:
            req["cursor"] = cursor
        result = await client.call("session/list", req)
        pages.append(result["sessions"])
        cursor = result.get("nextCursor")
        if cursor is None:
            return pages
        assert isinstance(cursor, str) and cursor
        assert len(pages) < 10, "paging does not terminate"


async def test_session_list_pages_newest_first_with_cwd_filter(server_factory, db_url: str, workspace: Path):
    other = workspace.parent / "other"
    other.mkdir()
    async with server_factory(scripted(), database_url=db_url) as server:
        created: list[tuple[str, str]] = []  # (id, cwd) in creation order
        async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
            for n in range(60):
                cwd = other if n % 12 == 5 else workspace  # 55 in workspace, 5 in other
                sid = (await _http_rpc(http, "session/new", {"cwd": str(cwd), "mcpServers": []}, n))[
                    "sessionId"
                ]
                created.append((sid, str(cwd)))
        assert sum(1 for _, c in created if c == str(workspace)) == 55
        newest_first = [sid for sid, _ in reversed(created)]

        client = await server.client()
        pages = await _list_all(client)
        assert [len(p) for p in pages] == [50, 10]
        listed = [s["sessionId"] for p in pages for s in p]
        assert listed == newest_first  # every id exactly once, newest first
        stamps = [s["updatedAt"] for p in pages for s in p]
        assert stamps == sorted(stamps, reverse=True)
        assert {s["cwd"] for p in pages for s in p} == {str(workspace), str(other)}

        ws_pages = await _list_all(client, cwd=str(workspace))
        assert [len(p) for p in ws_pages] == [50, 5]
        assert [s["sessionId"] for p in ws_pages for s in p] == [
            sid for sid, cwd in reversed(created) if cwd == str(workspace)
        ]
        other_pages = await _list_all(client, cwd=str(other))
        assert [[s["sessionId"] for s in p] for p in other_pages] == [
            [sid for sid, cwd in reversed(created) if cwd == str(other)]
        ]
        assert await client.call("session/list", {"cwd": str(workspace.parent / "nowhere")}) == {
            "sessions": []
        }

        for bad in [
            "not a cursor",
            "%%%",
            base64.urlsafe_b64encode(b"[1, 2, 3]").decode(),
            base64.urlsafe_b64encode(b'["yesterday", "sess_x"]').decode(),
            base64.urlsafe_b64encode(b'{"at": "2024-01-01T00:00:00"}').decode(),
        ]:
            with pytest.raises(RpcFailed) as err:
                await client.call("session/list", {"cursor": bad})
            assert err.value.code == INVALID_PARAMS, (bad, err.value.error)
        assert_frames_valid(client)
        await client.close()


@pytest.mark.parametrize(
    "db_url",
    [
        "sqlite",
        "postgres",
    ],
    indirect=True,
)
async def test_session_list_updated_at_is_utc_with_offset(server_factory, db_url: str, workspace: Path):
    async with server_factory(scripted(), database_url=db_url) as server:
        client = await server.client()
        before = datetime.now(UTC)
        sid = await new_session(client, workspace)
        (info,) = (await client.call("session/list", {}))["sessions"]
        assert info["sessionId"] == sid
        at = datetime.fromisoformat(info["updatedAt"])
        # Same answer on every backend: an unambiguous UTC instant, not a local wall-clock time.
        assert at.tzinfo is not None and at.utcoffset() == timedelta(0), info["updatedAt"]
        assert before - timedelta(seconds=5) <= at <= datetime.now(UTC) + timedelta(seconds=5)
        await client.close()


@pytest.mark.parametrize("spelling", ["trailing_slash", "symlink"])
async def test_session_list_cwd_filter_accepts_the_cwd_used_to_create(
    server_factory, workspace: Path, tmp_path: Path, spelling: str
):
    if spelling == "symlink":
        link = tmp_path / "ws-link"
        link.symlink_to(workspace, target_is_directory=True)
        cwd = str(link)
    else:
        cwd = str(workspace) + "/"
    async with server_factory(scripted()) as server:
        client = await server.client()
        sid = await new_session(client, Path(cwd))
        listed = await client.call("session/list", {"cwd": cwd})
        assert [s["sessionId"] for s in listed["sessions"]] == [sid]
        await client.close()


# ---------------------------------------------------------------------------- session/load


async def test_load_replay_equals_what_the_live_client_assembled(server_factory, workspace: Path):
    provider = scripted(
        {
            "reasoning": "Plan: write, then report.",
            "text": "Writing the report now.",
            "chunk_size": 3,
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "report.md", "content": "# Report\n"}}
            ],
        },
        {"text": "The report is in report.md.", "chunk_size": 4},
    )
    async with server_factory(provider) as server:
        live = await server.client()
        live.on_request = allow()
        sid = await new_session(live, workspace)
        result = await live.call("session/prompt", text_prompt(sid, "write the report"))
        assert result["stopReason"] == "end_turn"
        live_updates = live.updates(sid)

        loader = await server.client()
        loaded = await loader.call(
            "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        )
        assert loaded["modes"]["currentModeId"] == "default"
        replay = replayed_updates(loader, sid)
        # Nothing for this session arrived after the response (the replay was complete).
        assert loader.updates(sid) == replay

        # Text: same messages, same ids, same assembled text, same order.
        assert texts_by_message(replay) == texts_by_message(live_updates)
        assert [t for _, t in texts_by_message(replay)] == [
            "Writing the report now.",
            "The report is in report.md.",
        ]
        assert texts_by_message(replay, "agent_thought_chunk") == texts_by_message(
            live_updates, "agent_thought_chunk"
        )
        # The replay starts with the user's prompt (the live sender never got that echoed).
        assert replay[0]["sessionUpdate"] == "user_message_chunk"
        assert replay[0]["content"] == {"type": "text", "text": "write the report"}
        assert not any(u["sessionUpdate"] == "user_message_chunk" for u in live_updates)
        # The whole conversation, in order: the replay is what the live client assembled.
        assert skeleton(replay[1:]) == skeleton(live_updates)
        # The tool call and its final update are replayed exactly as they were sent live.
        live_call = next(u for u in live_updates if u["sessionUpdate"] == "tool_call")
        assert next(u for u in replay if u["sessionUpdate"] == "tool_call") == live_call
        live_final = [u for u in live_updates if u["sessionUpdate"] == "tool_call_update"][-1]
        assert live_final["status"] == "completed"
        replay_final = [u for u in replay if u["sessionUpdate"] == "tool_call_update"][-1]
        assert replay_final == live_final
        assert_frames_valid(live, loader)
        await live.close()
        await loader.close()


async def test_client_attached_by_load_receives_live_events_of_anothers_prompt(
    server_factory, workspace: Path
):
    provider = scripted({"text": "first answer"}, {"text": "second answer, streamed", "chunk_size": 5})
    async with served_session(server_factory, workspace, provider) as (server, first, sid):
        await first.call("session/prompt", text_prompt(sid, "first question"))

        second = await server.client()
        await second.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        replay_len = len(second.updates(sid))

        result = await first.call("session/prompt", text_prompt(sid, "second question"))
        assert result["stopReason"] == "end_turn"
        turn_id = result["_meta"]["agentd"]["turnId"]
        await second.wait_notification(
            lambda m: (
                m["method"] == "_agentd/event"
                and m["params"]["kind"] == "turn_ended"
                and m["params"]["event"]["turnId"] == turn_id
            )
        )

        seen_live = second.updates(sid)[replay_len:]
        assert seen_live[0]["sessionUpdate"] == "user_message_chunk"
        assert seen_live[0]["content"] == {"type": "text", "text": "second question"}
        first_live = first.updates(sid)
        # The sender does not get its own prompt echoed, in either turn.
        assert not any(u["sessionUpdate"] == "user_message_chunk" for u in first_live)
        # Both watchers saw the same streamed answer, chunk for chunk.
        second_chunks = [u for u in seen_live if u["sessionUpdate"] == "agent_message_chunk"]
        first_chunks = [u for u in first_live if u["sessionUpdate"] == "agent_message_chunk"]
        assert second_chunks == first_chunks[-len(second_chunks) :]
        assert "".join(u["content"]["text"] for u in second_chunks) == "second answer, streamed"
        assert len(second_chunks) > 1
        assert_frames_valid(first, second)
        await first.close()
        await second.close()


async def test_load_while_a_message_streams_still_assembles_the_whole_message(
    server_factory, workspace: Path
):
    text = "".join(f"{i:03d} " for i in range(60))  # 240 chars, 60 chunks, ~1.2 s
    provider = scripted({"text": text, "chunk_size": 4, "chunk_delay": 0.02})
    async with served_session(server_factory, workspace, provider) as (server, first, sid):
        prompt = asyncio.create_task(first.call("session/prompt", text_prompt(sid, "count")))
        # Well into the message (10 of its 60 chunks), far from its end.
        await first.wait_notification(
            lambda m: m["method"] == "session/update" and len(agent_text(first.updates(sid))) >= 40
        )

        second = await server.client()
        await second.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        result = await prompt
        turn_id = result["_meta"]["agentd"]["turnId"]
        await second.wait_notification(
            lambda m: (
                m["method"] == "_agentd/event"
                and m["params"]["kind"] == "turn_ended"
                and m["params"]["event"]["turnId"] == turn_id
            )
        )

        assert agent_text(first.updates(sid)) == text
        assert texts_by_message(second.updates(sid)) == texts_by_message(first.updates(sid))
        await first.close()
        await second.close()


# ---------------------------------------------------------------------------- session/set_mode


async def test_set_mode_notifies_and_persists(server_factory, db_url: str, workspace: Path):
    async with served_session(server_factory, workspace, scripted(), database_url=db_url) as (
        server,
        client,
        sid,
    ):
        assert await client.call("session/set_mode", {"sessionId": sid, "modeId": "plan"}) == {}
        update = await client.wait_notification(
            lambda m: (
                m["method"] == "session/update"
                and m["params"]["update"]["sessionUpdate"] != "available_commands_update"
            )
        )
        assert update["params"]["sessionId"] == sid
        assert update["params"]["update"] == {"sessionUpdate": "current_mode_update", "currentModeId": "plan"}
        with pytest.raises(RpcFailed) as err:
            await client.call("session/set_mode", {"sessionId": sid, "modeId": "yolo"})
        assert err.value.code == INVALID_PARAMS

        other = await server.client()
        loaded = await other.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        assert loaded["modes"]["currentModeId"] == "plan"
        assert {m["id"] for m in loaded["modes"]["availableModes"]} >= {"default", "plan"}
        assert [u for u in replayed_updates(other, sid) if u["sessionUpdate"] == "current_mode_update"] == [
            {"sessionUpdate": "current_mode_update", "currentModeId": "plan"}
        ]
        assert_frames_valid(client, other)
        await client.close()
        await other.close()

    # Persisted: a restarted server (same database) still has the session in plan mode.
    async with server_factory(scripted(), database_url=db_url) as server:
        fresh = await server.client()
        loaded = await fresh.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        assert loaded["modes"]["currentModeId"] == "plan"
        assert_frames_valid(fresh)
        await fresh.close()


async def test_load_of_unknown_session_is_an_error(server_factory, workspace: Path):
    async with server_factory(scripted()) as server:
        client = await server.client()
        with pytest.raises(RpcFailed) as err:
            await client.call(
                "session/load", {"sessionId": "sess_nope", "cwd": str(workspace), "mcpServers": []}
            )
        assert err.value.code == -32002  # resource not found
        assert client.updates() == []  # nothing replayed, nothing attached
        assert_frames_valid(client)
        await client.close()
