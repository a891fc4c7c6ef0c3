"""Permissions (R-T4) over a real WebSocket: which calls ask, what each answer does, and
what each mode allows. Plan mode is read-only whatever was remembered before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.core.conversation import Message
from agentd.infra.config import PermissionMode
from tests.support.client import RequestHandler, WsClient, allow, text_prompt
from tests.support.server import scripted
from tests.support.session import assert_valid_frames, final_tool_updates, new_session, shown_text, tool_call

# ---------------------------------------------------------------------------- helpers


def asked(client: WsClient) -> list[str]:
    """Tool call ids the server asked permission for, in order."""
    assert all(r["method"] == "session/request_permission" for r in client.server_requests)
    return [r["params"]["toolCall"]["toolCallId"] for r in client.server_requests]


def statuses(client: WsClient, session_id: str) -> dict[str, str]:
    return {k: v["status"] for k, v in final_tool_updates(client, session_id).items()}


def answer_by_call(answers: dict[str, str]) -> RequestHandler:
    """Answer each permission request with the option given for its tool call id."""

    async def handler(msg: dict[str, Any]) -> dict[str, Any]:
        option = answers[msg["params"]["toolCall"]["toolCallId"]]
        return {"outcome": {"outcome": "selected", "optionId": option}}

    return handler


def assert_well_formed(messages: list[Message]) -> None:
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    for m in messages:
        for c in m.tool_calls:
            assert c.id in answered, f"tool call {c.id} has no result"


# ---------------------------------------------------------------------------- default mode


async def test_default_mode_asks_for_writes_and_commands_but_not_reads(server_factory, workspace: Path):
    (workspace / "readme.txt").write_text("hello\n")
    provider = scripted(
        {
            "tool_calls": [
                tool_call("read_file", "call_read", path="readme.txt"),
                tool_call("list_dir", "call_list", path="."),
            ]
        },
        {"tool_calls": [tool_call("write_file", "call_write", path="new.txt", content="new\n")]},
        {"tool_calls": [tool_call("bash", "call_bash", command="echo ran > ran.txt")]},
        {"text": "done"},
    )
    async with server_factory(provider, permission_mode=PermissionMode.DEFAULT) as server:
        client = await server.client()
        client.on_request = allow("allow_once")
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "look, write, run"))

        assert result["stopReason"] == "end_turn"
        assert asked(client) == ["call_write", "call_bash"]
        assert statuses(client, sid) == {
            "call_read": "completed",
            "call_list": "completed",
            "call_write": "completed",
            "call_bash": "completed",
        }
        assert (workspace / "new.txt").read_text() == "new\n"
        assert (workspace / "ran.txt").read_text() == "ran\n"
        # The permission request describes the call and offers the four options.
        perm = client.server_requests[0]["params"]
        assert perm["sessionId"] == sid
        assert perm["toolCall"]["kind"] == "edit"
        assert perm["toolCall"]["rawInput"] == {"path": "new.txt", "content": "new\n"}
        assert {o["optionId"] for o in perm["options"]} == {
            "allow_once", "allow_always", "reject_once", "reject_always",
        }  # fmt: skip
        resolved = [f["params"] for f in client.frames if f.get("method") == "_agentd/permission/resolved"]
        assert [(r["outcome"], r.get("optionId")) for r in resolved] == [("selected", "allow_once")] * 2
        assert_valid_frames(client)
        await client.close()


async def test_allow_once_runs_the_call_and_asks_again_next_time(server_factory, workspace: Path):
    provider = scripted(
        {"tool_calls": [tool_call("write_file", "call_1", path="a.txt", content="a")]},
        {"tool_calls": [tool_call("write_file", "call_2", path="b.txt", content="b")]},
        {"text": "first turn done"},
        {"tool_calls": [tool_call("write_file", "call_3", path="c.txt", content="c")]},
        {"text": "second turn done"},
    )
    async with server_factory(provider) as server:
        client = await server.client()
        client.on_request = allow("allow_once")
        sid = await new_session(client, workspace)

        assert (await client.call("session/prompt", text_prompt(sid, "write a and b")))[
            "stopReason"
        ] == "end_turn"
        assert (await client.call("session/prompt", text_prompt(sid, "write c")))["stopReason"] == "end_turn"

        assert asked(client) == ["call_1", "call_2", "call_3"]
        for name in ("a", "b", "c"):
            assert (workspace / f"{name}.txt").read_text() == name
        await client.close()


async def test_allow_always_stops_asking_for_that_tool_in_the_session(server_factory, workspace: Path):
    provider = scripted(
        # the answer for the first call already covers the second call of the same step
        {
            "tool_calls": [
                tool_call("write_file", "call_1", path="a.txt", content="a"),
                tool_call("write_file", "call_1b", path="a2.txt", content="a2"),
            ]
        },
        {"tool_calls": [tool_call("write_file", "call_2", path="b.txt", content="b")]},
        # edit_file is another tool: "always" for write_file does not cover it
        {"tool_calls": [tool_call("edit_file", "call_3", path="b.txt", old_string="b", new_string="B")]},
        {"tool_calls": [tool_call("bash", "call_4", command="true")]},
        {"text": "first turn done"},
        {"tool_calls": [tool_call("write_file", "call_5", path="c.txt", content="c")]},
        {"text": "second turn done"},
    )
    async with server_factory(provider) as server:
        client = await server.client()
        client.on_request = answer_by_call(
            {"call_1": "allow_always", "call_3": "allow_once", "call_4": "allow_once"}
        )
        sid = await new_session(client, workspace)

        assert (await client.call("session/prompt", text_prompt(sid, "write things")))[
            "stopReason"
        ] == "end_turn"
        assert (await client.call("session/prompt", text_prompt(sid, "write c")))["stopReason"] == "end_turn"

        assert asked(client) == ["call_1", "call_3", "call_4"]
        assert (workspace / "a.txt").read_text() == "a"
        assert (workspace / "a2.txt").read_text() == "a2"
        assert (workspace / "b.txt").read_text() == "B"
        assert (workspace / "c.txt").read_text() == "c"
        assert set(statuses(client, sid).values()) == {"completed"}
        await client.close()


async def test_allow_always_is_per_session(server_factory, workspace: Path):
    provider = scripted(
        {"tool_calls": [tool_call("write_file", "call_1", path="a.txt", content="a")]},
        {"text": "done in session one"},
        {"tool_calls": [tool_call("write_file", "call_2", path="b.txt", content="b")]},
        {"text": "done in session two"},
    )
    async with server_factory(provider) as server:
        client = await server.client()
        client.on_request = allow("allow_always")
        sid_1 = await new_session(client, workspace)
        sid_2 = await new_session(client, workspace)

        await client.call("session/prompt", text_prompt(sid_1, "write a"))
        await client.call("session/prompt", text_prompt(sid_2, "write b"))

        assert asked(client) == ["call_1", "call_2"]
        await client.close()


async def test_reject_once_stops_the_step_but_keeps_what_was_approved_before(server_factory, workspace: Path):
    provider = scripted(
        {
            "text": "Writing three files.",
            "tool_calls": [
                tool_call("write_file", "call_a", path="a.txt", content="a"),
                tool_call("write_file", "call_b", path="b.txt", content="b"),
                tool_call("write_file", "call_c", path="c.txt", content="c"),
            ],
        },
        {"text": "should not be reached in this turn"},
        {"text": "fine, I stopped."},
    )
    async with server_factory(provider) as server:
        client = await server.client()
        client.on_request = answer_by_call(
            {"call_a": "allow_once", "call_b": "reject_once", "call_c": "allow_once"}
        )
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "write a, b and c"))

        assert result["stopReason"] == "cancelled"
        assert result["_meta"]["agentd"]["outcome"] == "cancelled"
        assert result["_meta"]["agentd"]["reason"] == "permission_rejected"
        assert asked(client) == ["call_a", "call_b"]  # c is never asked about
        assert (workspace / "a.txt").read_text() == "a"
        assert not (workspace / "b.txt").exists()
        assert not (workspace / "c.txt").exists()
        finals = final_tool_updates(client, sid)
        assert finals["call_a"]["status"] == "completed"
        assert finals["call_b"]["status"] == "failed"
        assert "rejected by the user" in shown_text(finals["call_b"])
        assert finals["call_c"]["status"] == "failed"
        assert "cancelled because an earlier tool call in this step was rejected" in shown_text(
            finals["call_c"]
        )
        # The turn stopped at the rejection: the model was not called again in it.
        assert len(provider.requests) == 1

        # The session goes on; the model sees all three results, in call order.
        assert (await client.call("session/prompt", text_prompt(sid, "ok?")))["stopReason"] == "end_turn"
        messages = provider.requests[1].messages
        assert_well_formed(messages)
        tool_msgs = [m for m in messages if m.role == "tool"]
        assert [(m.tool_call_id, m.is_error) for m in tool_msgs] == [
            ("call_a", False),
            ("call_b", True),
            ("call_c", True),
        ]
        assert_valid_frames(client)
        await client.close()


async def test_reject_always_refuses_that_tool_without_asking_again(server_factory, workspace: Path):
    provider = scripted(
        {"tool_calls": [tool_call("bash", "call_1", command="touch one.txt")]},  # rejection ends turn one
        {"tool_calls": [tool_call("bash", "call_2", command="touch two.txt")]},
        {"text": "turn two over"},
    )
    async with server_factory(provider) as server:
        client = await server.client()
        client.on_request = allow("reject_always")
        sid = await new_session(client, workspace)

        first = await client.call("session/prompt", text_prompt(sid, "touch one"))
        assert first["stopReason"] == "cancelled"
        assert first["_meta"]["agentd"]["reason"] == "permission_rejected"
        second = await client.call("session/prompt", text_prompt(sid, "touch two"))

        assert asked(client) == ["call_1"]
        assert second["stopReason"] == "end_turn"  # a remembered refusal is a result, not a stop
        finals = final_tool_updates(client, sid)
        assert finals["call_2"]["status"] == "failed"
        assert "always reject bash" in shown_text(finals["call_2"])
        assert not (workspace / "one.txt").exists()
        assert not (workspace / "two.txt").exists()
        await client.close()


async def test_client_cancelling_the_permission_request_cancels_the_turn(server_factory, workspace: Path):
    provider = scripted(
        {"tool_calls": [tool_call("write_file", "call_w", path="w.txt", content="w")]},
        {"text": "not reached"},
    )

    async def cancelled(msg: dict[str, Any]) -> dict[str, Any]:
        return {"outcome": {"outcome": "cancelled"}}

    async with server_factory(provider) as server:
        client = await server.client()
        client.on_request = cancelled
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "write w"))

        assert result["stopReason"] == "cancelled"
        assert result["_meta"]["agentd"]["reason"] == "user_cancelled"
        assert not (workspace / "w.txt").exists()
        assert statuses(client, sid) == {"call_w": "failed"}
        resolved = [f["params"] for f in client.frames if f.get("method") == "_agentd/permission/resolved"]
        assert [r["outcome"] for r in resolved] == ["cancelled"]
        assert len(provider.requests) == 1
        await client.close()


# ---------------------------------------------------------------------------- other modes


async def test_bypass_asks_nothing_and_runs_writes_and_commands(server_factory, workspace: Path):
    provider = scripted(
        {
            "tool_calls": [
                tool_call("write_file", "call_w", path="w.txt", content="written\n"),
                tool_call("bash", "call_b", command="echo from-bash > b.txt && echo ok"),
            ]
        },
        {
            "tool_calls": [
                tool_call("edit_file", "call_e", path="w.txt", old_string="written", new_string="edited")
            ]
        },
        {"text": "done"},
    )
    async with server_factory(provider, permission_mode=PermissionMode.BYPASS) as server:
        client = await server.client()
        client.on_request = allow("reject_once")  # would break the test if ever asked
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "go"))

        assert result["stopReason"] == "end_turn"
        assert client.server_requests == []
        assert (workspace / "w.txt").read_text() == "edited\n"
        assert (workspace / "b.txt").read_text() == "from-bash\n"
        assert statuses(client, sid) == {"call_w": "completed", "call_b": "completed", "call_e": "completed"}
        await client.close()


async def test_accept_edits_writes_without_asking_but_asks_for_commands(server_factory, workspace: Path):
    provider = scripted(
        {"tool_calls": [tool_call("write_file", "call_w", path="w.txt", content="w\n")]},
        {"tool_calls": [tool_call("edit_file", "call_e", path="w.txt", old_string="w", new_string="v")]},
        {"tool_calls": [tool_call("bash", "call_b", command="echo hi > b.txt")]},
        {"text": "done"},
    )
    async with server_factory(provider, permission_mode=PermissionMode.ACCEPT_EDITS) as server:
        client = await server.client()
        client.on_request = allow("allow_once")
        sid = await new_session(client, workspace)
        assert (await client.call("session/prompt", text_prompt(sid, "go")))["stopReason"] == "end_turn"

        assert asked(client) == ["call_b"]
        assert (workspace / "w.txt").read_text() == "v\n"
        assert (workspace / "b.txt").read_text() == "hi\n"
        await client.close()


async def test_plan_mode_refuses_changes_readably_and_still_reads(server_factory, workspace: Path):
    (workspace / "keep.txt").write_text("original\n")
    provider = scripted(
        {
            "tool_calls": [
                tool_call("write_file", "call_w", path="new.txt", content="x"),
                tool_call(
                    "edit_file", "call_e", path="keep.txt", old_string="original", new_string="changed"
                ),
                tool_call("bash", "call_b", command="touch made.txt"),
                tool_call("read_file", "call_r", path="keep.txt"),
                tool_call("list_dir", "call_l", path="."),
            ]
        },
        {"text": "Here is my plan."},
    )
    async with server_factory(provider, permission_mode=PermissionMode.PLAN) as server:
        client = await server.client()
        client.on_request = allow("allow_always")  # would break the test if ever asked
        sid = await new_session(client, workspace)

        result = await client.call("session/prompt", text_prompt(sid, "plan it"))

        # Refusals are results the model reads; the turn goes on to the next step.
        assert result["stopReason"] == "end_turn"
        assert len(provider.requests) == 2
        assert client.server_requests == []
        assert not (workspace / "new.txt").exists()
        assert (workspace / "keep.txt").read_text() == "original\n"
        assert not (workspace / "made.txt").exists()
        finals = final_tool_updates(client, sid)
        for call_id, tool in (("call_w", "write_file"), ("call_e", "edit_file"), ("call_b", "bash")):
            assert finals[call_id]["status"] == "failed"
            assert f"plan mode is read-only, {tool} would change the workspace" in shown_text(finals[call_id])
        assert finals["call_r"]["status"] == "completed"
        assert "original" in shown_text(finals["call_r"])
        assert finals["call_l"]["status"] == "completed"
        tool_msgs = {m.tool_call_id: m for m in provider.requests[1].messages if m.role == "tool"}
        assert tool_msgs["call_w"].is_error and "plan mode" in tool_msgs["call_w"].content
        assert not tool_msgs["call_r"].is_error
        assert_valid_frames(client)
        await client.close()


async def test_plan_mode_refuses_writes_even_after_allow_always(server_factory, workspace: Path):
    provider = scripted(
        {"tool_calls": [tool_call("write_file", "call_1", path="a.txt", content="a")]},
        {"text": "wrote a"},
        {"tool_calls": [tool_call("write_file", "call_2", path="b.txt", content="b")]},
        {"text": "could not write b"},
        {"tool_calls": [tool_call("write_file", "call_3", path="c.txt", content="c")]},
        {"text": "wrote c"},
    )
    async with server_factory(provider, permission_mode=PermissionMode.DEFAULT) as server:
        client = await server.client()
        client.on_request = allow("allow_always")
        sid = await new_session(client, workspace)

        assert (await client.call("session/prompt", text_prompt(sid, "write a")))["stopReason"] == "end_turn"
        assert asked(client) == ["call_1"]
        assert (workspace / "a.txt").read_text() == "a"

        await client.call("session/set_mode", {"sessionId": sid, "modeId": "plan"})
        assert (await client.call("session/prompt", text_prompt(sid, "write b")))["stopReason"] == "end_turn"
        assert asked(client) == ["call_1"]
        assert not (workspace / "b.txt").exists()
        final = final_tool_updates(client, sid)["call_2"]
        assert final["status"] == "failed"
        assert "plan mode is read-only" in shown_text(final)

        # Leaving plan mode (clearing the gate) restores what was remembered: no question.
        await client.call("session/set_config_option", {"sessionId": sid, "configId": "plan", "value": "off"})
        assert (await client.call("session/prompt", text_prompt(sid, "write c")))["stopReason"] == "end_turn"
        assert asked(client) == ["call_1"]
        assert (workspace / "c.txt").read_text() == "c"

        mode_updates = [
            u["currentModeId"] for u in client.updates(sid) if u["sessionUpdate"] == "current_mode_update"
        ]
        assert mode_updates == ["plan", "default"]
        assert_valid_frames(client)
        await client.close()
