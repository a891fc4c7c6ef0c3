"""R-L3c end to end: a conversation broken the way a crash, a cancel or a provider switch
leaves it is written straight into the store; a fresh server loads the session, and the
request that reaches the provider is repaired (the stored conversation is not rewritten).

Each repair: (a) tool-call ids normalised consistently in the call and its result,
(b) system messages merged into one at the front, (c) a drifted tool result moved back
behind its call, (d) orphan / duplicate tool results dropped, (e) a missing tool result
synthesised, (f) old oversized tool results truncated while the 6 most recent stay whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentd.core import INTERRUPTED_RESULT
from agentd.core.conversation import Message, ToolCall
from agentd.loop.repair import DEFAULT_LIMITS, MISSING_RESULT_TEXT, normalize_tool_call_id
from agentd.providers.scripted import ScriptedProvider
from agentd.store.db import Batch, Store
from tests.support.acp_schema import AcpValidator
from tests.support.client import text_prompt
from tests.support.server import scripted
from tests.support.session import served_session

SAFE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
CONTINUE = "please continue"


def call(call_id: str, path: str = "a.txt") -> ToolCall:
    return ToolCall(id=call_id, name="read_file", arguments=f'{{"path": "{path}"}}')


def asks(*calls: ToolCall, text: str = "") -> Message:
    return Message(role="assistant", content=text, tool_calls=list(calls))


def says(text: str) -> Message:
    return Message(role="assistant", content=text)


@dataclass
class Run:
    session_id: str
    provider: ScriptedProvider
    frames: list[Any]
    stored_after: list[Message]

    @property
    def request(self) -> list[Message]:
        """The messages of the first request that reached the provider."""
        return self.provider.requests[0].messages

    def turn_ended(self) -> dict[str, Any]:
        events = [
            f["params"]["event"]
            for f in self.frames
            if isinstance(f, dict)
            and f.get("method") == "_agentd/event"
            and f["params"]["kind"] == "turn_ended"
        ]
        assert len(events) == 1, events
        return events[0]


async def run_on_broken_conversation(
    server_factory: Any, db_url: str, workspace: Path, broken: list[Message]
) -> Run:
    """Create a session, stop the server, write `broken` as the session's conversation,
    start a new server on the same database, load the session and prompt once."""
    async with served_session(server_factory, workspace, scripted(), database_url=db_url) as (_, _, sid):
        pass  # only the session is wanted: the server stops with it stored

    store = await Store.open(db_url)
    try:
        rows = [(i, m.model_dump(mode="json")) for i, m in enumerate(broken)]
        await store.commit([Batch(sid, messages=rows, truncate_from=0)])
    finally:
        await store.close()

    provider = scripted({"text": "Carrying on."})
    async with server_factory(provider, database_url=db_url) as server:
        client = await server.client()
        await client.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        result = await client.call("session/prompt", text_prompt(sid, CONTINUE))
        assert result["stopReason"] == "end_turn"
        assert len(provider.requests) == 1
        validator = AcpValidator.default()
        for frame in client.frames:
            validator.assert_valid_agent_frame(frame, client.sent_methods)
        frames = list(client.frames)
        await client.close()

    store = await Store.open(db_url)
    try:
        stored = [Message.model_validate(m) for m in await store.load_messages(sid)]
    finally:
        await store.close()
    return Run(sid, provider, frames, stored)


def assert_well_formed(messages: list[Message]) -> None:
    """Provider rules: one system message at most, first; every call answered exactly once,
    directly behind the assistant message that made it; no result without its call."""
    assert all(m.role != "system" for m in messages[1:])
    i = 0
    while i < len(messages):
        m = messages[i]
        assert m.role != "tool", f"tool result outside its call's block at {i}: {m}"
        i += 1
        if m.role == "assistant" and m.tool_calls:
            results = []
            while i < len(messages) and messages[i].role == "tool":
                results.append(messages[i].tool_call_id)
                i += 1
            assert results == [c.id for c in m.tool_calls]
        for c in m.tool_calls:
            assert SAFE_ID.fullmatch(c.id), c.id


# --------------------------------------------------------------------------------------------
# The broken conversations


BAD_CHARS_ID = "call:1/ä b"
TOO_LONG_ID = "toolu_" + "x" * 80


def broken_ids() -> list[Message]:
    c_bad, c_long, c_ok = call(BAD_CHARS_ID, "a.txt"), call(TOO_LONG_ID, "b.txt"), call("call_ok", "c.txt")
    return [
        Message.user("read a and b"),
        asks(c_bad, c_long),
        Message.tool_result(c_bad, "A"),
        Message.tool_result(c_long, "B"),
        asks(c_ok),
        Message.tool_result(c_ok, "C"),
        says("Read all three."),
    ]


def broken_systems() -> list[Message]:
    return [
        Message.system("Rules from the first provider."),
        Message.user("hi"),
        says("hello"),
        Message.system("Rules added after a provider switch."),
        Message.user("more"),
        says("sure"),
    ]


def broken_order() -> list[Message]:
    c1 = call("c1")
    return [
        Message.user("read a.txt"),
        asks(c1, text="Reading."),
        Message.user("are you done?"),  # written before the result (an interjection during the tool)
        Message.tool_result(c1, "A"),
        says("Yes: it says A."),
    ]


def broken_orphans() -> list[Message]:
    c1 = call("c1")
    return [
        Message.user("hi"),
        says("hello"),
        Message(role="tool", content="stale output", tool_call_id="ghost", name="bash"),
        Message.user("read a.txt"),
        asks(c1),
        Message.tool_result(c1, "A"),
        Message.tool_result(c1, "A, written twice"),
        says("It says A."),
    ]


def broken_dangling_earlier_step() -> list[Message]:
    c1, c2 = call("c1", "a.txt"), call("c2", "b.txt")
    return [
        Message.user("read a.txt"),
        asks(c1),  # cut off: its result never reached the store
        Message.user("never mind, read b.txt"),
        asks(c2),
        Message.tool_result(c2, "B"),
        says("It says B."),
    ]


def broken_reused_ids() -> list[Message]:
    # A provider that reuses `call_0` every step; the second step's call was cut off.
    first, second = call("call_0", "a.txt"), call("call_0", "b.txt")
    return [
        Message.user("read a.txt and then b.txt"),
        asks(first),
        Message.tool_result(first, "A"),
        asks(second),
        Message.user("what happened?"),
        says("I was interrupted."),
    ]


BIG = 25_000  # > oversized_tool_result_chars
N_RESULTS = DEFAULT_LIMITS.keep_recent_tool_results + 2


def big_output(i: int) -> str:
    return f"<head {i}>" + chr(ord("a") + i) * BIG + f"<tail {i}>"


def broken_big_results() -> list[Message]:
    out = [Message.user("read the logs")]
    for i in range(N_RESULTS):
        c = call(f"c{i}", f"log{i}.txt")
        out += [asks(c), Message.tool_result(c, big_output(i))]
    out.append(says("Those were long logs."))
    return out


# --------------------------------------------------------------------------------------------
# (a)–(f): what reaches the provider, on SQLite and on Postgres


async def test_a_tool_call_ids_are_normalised_consistently(
    server_factory, workspace: Path, db_url: str
) -> None:
    broken = broken_ids()
    run = await run_on_broken_conversation(server_factory, db_url, workspace, broken)
    msgs = run.request
    assert [m.role for m in msgs] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    new_bad, new_long = (c.id for c in msgs[1].tool_calls)
    assert new_bad == normalize_tool_call_id(BAD_CHARS_ID) != BAD_CHARS_ID
    assert new_long == normalize_tool_call_id(TOO_LONG_ID) != TOO_LONG_ID
    assert new_bad != new_long
    # Each result follows its call's new id; the arguments and contents are untouched.
    assert (msgs[2].tool_call_id, msgs[2].content) == (new_bad, "A")
    assert (msgs[3].tool_call_id, msgs[3].content) == (new_long, "B")
    assert [c.arguments for c in msgs[1].tool_calls] == [c.arguments for c in broken[1].tool_calls]
    # A safe id is left alone.
    assert msgs[4].tool_calls[0].id == "call_ok" and msgs[5].tool_call_id == "call_ok"
    assert msgs[-1].content == CONTINUE
    assert_well_formed(msgs)
    # The request carries a repaired copy; the store keeps the conversation as it happened.
    assert run.stored_after[: len(broken)] == broken


async def test_b_system_messages_are_merged_into_one_at_the_front(
    server_factory, workspace: Path, db_url: str
) -> None:
    run = await run_on_broken_conversation(server_factory, db_url, workspace, broken_systems())
    msgs = run.request
    assert msgs[0] == Message.system("Rules from the first provider.\n\nRules added after a provider switch.")
    assert [(m.role, m.content) for m in msgs[1:]] == [
        ("user", "hi"),
        ("assistant", "hello"),
        ("user", "more"),
        ("assistant", "sure"),
        ("user", CONTINUE),
    ]
    # The server's own system prompt still travels separately.
    assert "agentd" in run.provider.requests[0].system


async def test_c_a_drifted_tool_result_moves_back_behind_its_call(
    server_factory, workspace: Path, db_url: str
) -> None:
    run = await run_on_broken_conversation(server_factory, db_url, workspace, broken_order())
    msgs = run.request
    assert [(m.role, m.content) for m in msgs] == [
        ("user", "read a.txt"),
        ("assistant", "Reading."),
        ("tool", "A"),
        ("user", "are you done?"),
        ("assistant", "Yes: it says A."),
        ("user", CONTINUE),
    ]
    assert msgs[2].tool_call_id == msgs[1].tool_calls[0].id == "c1"
    assert_well_formed(msgs)


async def test_d_orphan_and_duplicate_tool_results_are_dropped(
    server_factory, workspace: Path, db_url: str
) -> None:
    run = await run_on_broken_conversation(server_factory, db_url, workspace, broken_orphans())
    msgs = run.request
    assert [(m.role, m.content) for m in msgs] == [
        ("user", "hi"),
        ("assistant", "hello"),
        ("user", "read a.txt"),
        ("assistant", ""),
        ("tool", "A"),
        ("assistant", "It says A."),
        ("user", CONTINUE),
    ]
    assert all(m.tool_call_id != "ghost" for m in msgs)
    assert_well_formed(msgs)


async def test_e_a_dangling_call_in_an_earlier_step_reaches_the_provider_answered(
    server_factory, workspace: Path, db_url: str
) -> None:
    """The session manager's crash recovery answers it on load ("Interrupted"), right behind
    its own step, and persists that; the loop's repair then has nothing left to do."""
    run = await run_on_broken_conversation(server_factory, db_url, workspace, broken_dangling_earlier_step())
    msgs = run.request
    assert [m.role for m in msgs] == [
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    synthesised = msgs[2]
    assert synthesised.tool_call_id == "c1" and synthesised.name == "read_file"
    assert synthesised.is_error and synthesised.content == INTERRUPTED_RESULT
    assert (msgs[5].tool_call_id, msgs[5].content) == ("c2", "B")
    assert_well_formed(msgs)
    # The recovery was persisted: the store holds what the model saw.
    assert run.stored_after[: len(msgs)] == msgs


async def test_e_a_missing_result_the_load_recovery_cannot_see_is_synthesised(
    server_factory, workspace: Path, db_url: str
) -> None:
    """A provider reused `call_0`: the load recovery sees "call_0" answered, so only the
    loop's repair can give the second call its own id and a synthesised result."""
    broken = broken_reused_ids()
    run = await run_on_broken_conversation(server_factory, db_url, workspace, broken)
    msgs = run.request
    assert [m.role for m in msgs] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "user",
        "assistant",
        "user",
    ]
    assert msgs[1].tool_calls[0].id == "call_0" and msgs[2].tool_call_id == "call_0"
    assert msgs[2].content == "A" and not msgs[2].is_error
    second_id = msgs[3].tool_calls[0].id
    assert second_id != "call_0" and SAFE_ID.fullmatch(second_id)
    assert msgs[3].tool_calls[0].arguments == broken[3].tool_calls[0].arguments
    missing = msgs[4]
    assert missing.tool_call_id == second_id and missing.name == "read_file"
    assert missing.is_error and missing.content == MISSING_RESULT_TEXT
    assert "cancelled" in missing.content
    assert_well_formed(msgs)


async def test_f_old_oversized_tool_results_are_truncated_and_the_recent_six_stay_whole(
    server_factory, workspace: Path, db_url: str
) -> None:
    run = await run_on_broken_conversation(server_factory, db_url, workspace, broken_big_results())
    results = [m for m in run.request if m.role == "tool"]
    assert len(results) == N_RESULTS
    keep = DEFAULT_LIMITS.keep_recent_tool_results
    for i, m in enumerate(results[:-keep]):
        original = big_output(i)
        assert len(m.content) <= DEFAULT_LIMITS.truncated_tool_result_chars
        assert "characters cut from this old tool result" in m.content
        # Head and tail survive (errors are often at the end).
        assert m.content.startswith(original[:200]) and m.content.endswith(original[-200:])
        assert m.tool_call_id == f"c{i}"
    for i, m in enumerate(results[-keep:], start=N_RESULTS - keep):
        assert m.content == big_output(i)
    assert_well_formed(run.request)
    # The store still has every output whole.
    stored_results = [m.content for m in run.stored_after if m.role == "tool"]
    assert stored_results == [big_output(i) for i in range(N_RESULTS)]


# --------------------------------------------------------------------------------------------
# The repairs are recorded on the turn


TURN_REPAIRS = {
    "a-ids": (broken_ids, ["tool_call_ids_normalized"]),
    "b-system": (broken_systems, ["system_messages_merged"]),
    "c-order": (broken_order, ["message_order_repaired"]),
    "d-orphans": (broken_orphans, ["orphan_tool_results_dropped"]),
    "e-missing": (broken_reused_ids, ["tool_call_ids_normalized", "missing_tool_results_synthesized"]),
    "f-truncate": (broken_big_results, ["old_tool_results_truncated"]),
}


@pytest.mark.parametrize("scenario", list(TURN_REPAIRS))
async def test_the_turn_ended_event_lists_the_repairs(
    server_factory, workspace: Path, tmp_path: Path, scenario: str
) -> None:
    build, expected = TURN_REPAIRS[scenario]
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'repairs.db'}"
    run = await run_on_broken_conversation(server_factory, db_url, workspace, build())
    ended = run.turn_ended()
    assert ended["outcome"] == "completed"
    assert ended["turn"]["repairs"] == expected
    # The durable copy in the store says the same.
    store = await Store.open(db_url)
    try:
        stored = [e.payload for e in await store.read_events(run.session_id) if e.kind == "turn_ended"]
    finally:
        await store.close()
    assert stored[-1]["turn"]["repairs"] == expected


async def test_a_well_formed_conversation_reaches_the_provider_unchanged(
    server_factory, workspace: Path, tmp_path: Path
) -> None:
    c1 = call("c1")
    fine = [Message.user("read a.txt"), asks(c1), Message.tool_result(c1, "A"), says("It says A.")]
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'fine.db'}"
    run = await run_on_broken_conversation(server_factory, db_url, workspace, fine)
    assert run.request == [*fine, Message.user(CONTINUE)]
    assert "repairs" not in run.turn_ended().get("turn", {})
