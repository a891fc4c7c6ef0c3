"""End to end over a real WebSocket: a prompt streams text, calls a tool with
permission, edits a file in the workspace, and ends with end_turn."""

from __future__ import annotations

from pathlib import Path

from tests.support.acp_schema import AcpValidator
from tests.support.client import agent_text, allow, text_prompt
from tests.support.server import scripted
from tests.support.session import served_session


async def test_prompt_streams_text_runs_tool_with_permission_and_ends_turn(server_factory, workspace: Path):
    provider = scripted(
        {
            "reasoning": "I should write the file.",
            "text": "Writing it now.",
            "chunk_size": 4,
            "tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "hello\n"}}],
        },
        {"text": "Done: notes.txt holds a greeting.", "chunk_size": 5},
    )
    async with server_factory(provider) as server:
        client = await server.client()
        client.on_request = allow()
        session = await client.call("session/new", {"cwd": str(workspace), "mcpServers": []})
        sid = session["sessionId"]
        assert session["modes"]["currentModeId"] == "default"

        result = await client.call("session/prompt", text_prompt(sid, "write notes"))

        assert result["stopReason"] == "end_turn"
        assert (workspace / "notes.txt").read_text() == "hello\n"
        updates = client.updates(sid)
        kinds = [u["sessionUpdate"] for u in updates]
        # Streamed as several chunks, not one blob.
        assert kinds.count("agent_message_chunk") > 2
        assert agent_text(updates) == "Writing it now.Done: notes.txt holds a greeting."
        thought = "".join(
            u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_thought_chunk"
        )
        assert thought == "I should write the file."
        # The tool call: announced pending, asked permission, ran, completed with a diff.
        call = next(u for u in updates if u["sessionUpdate"] == "tool_call")
        assert call["status"] == "pending" and call["kind"] == "edit"
        assert call["rawInput"] == {"path": "notes.txt", "content": "hello\n"}
        assert call["locations"][0]["path"] == str(workspace / "notes.txt")
        assert len(client.server_requests) == 1
        perm = client.server_requests[0]
        assert perm["method"] == "session/request_permission"
        assert perm["params"]["toolCall"]["toolCallId"] == call["toolCallId"]
        assert {o["kind"] for o in perm["params"]["options"]} == {
            "allow_once",
            "allow_always",
            "reject_once",
            "reject_always",
        }
        statuses = [
            u.get("status")
            for u in updates
            if u["sessionUpdate"] == "tool_call_update" and u["toolCallId"] == call["toolCallId"]
        ]
        assert statuses == ["in_progress", "completed"]
        final = [u for u in updates if u["sessionUpdate"] == "tool_call_update"][-1]
        diff = next(c for c in final["content"] if c["type"] == "diff")
        assert diff["newText"] == "hello\n" and "oldText" not in diff
        # The text that asked for the tool came before the tool's events (drain barrier).
        assert kinds.index("tool_call") > kinds.index("agent_message_chunk")
        # The model saw the tool result in its second request.
        second = provider.requests[1]
        tool_msgs = [m for m in second.messages if m.role == "tool"]
        assert len(tool_msgs) == 1 and not tool_msgs[0].is_error
        # Every frame the server sent is valid ACP for its method.
        validator = AcpValidator.default()
        for frame in client.frames:
            validator.assert_valid_agent_frame(frame, client.sent_methods)
        await client.close()


async def test_every_notification_carries_seq_and_durable_seqs_increase(server_factory, workspace: Path):
    provider = scripted({"text": "one two three four", "chunk_size": 3})
    async with served_session(server_factory, workspace, provider) as (_, client, sid):
        await client.call("session/prompt", text_prompt(sid, "count"))
        notes = [f for f in client.frames if isinstance(f, dict) and "method" in f and "id" not in f]
        assert notes
        seqs = []
        for n in notes:
            meta = n["params"]["_meta"]["agentd"]
            assert isinstance(meta["seq"], int)
            if not meta.get("transient"):
                seqs.append(meta["seq"])
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
