"""R-L3d end to end: compaction over a real WebSocket with the scripted provider.

When the request estimate reaches 85 % of the context window, older history is
summarised by one extra provider call (the summariser's own system prompt, no tools) and
the recent user turns are kept verbatim. A provider `context_overflow` error compacts and
retries once; `_agentd/session/compact` forces a compaction (at once when idle, before the
running turn's next request otherwise). Clients see an ACP `compaction_update`; the
pre-compaction messages stay in the store (the durable `compaction` event's `replaced`)
while the `messages` table holds the compacted conversation, which is what a restarted
server continues from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentd.core.conversation import Message
from agentd.core.provider import ProviderRequest
from agentd.infra.config import PermissionMode
from agentd.loop.compaction import (
    DEFAULT_LIMITS,
    SUMMARY_HEADER,
    SUMMARY_SYSTEM,
    SUMMARY_TAG,
    estimate_tokens,
)
from agentd.protocol.agentd import COMPACT
from agentd.store.db import Store
from tests.support.client import RpcFailed, WsClient, agent_text, allow, text_prompt
from tests.support.server import scripted
from tests.support.session import assert_valid_frames, new_session

# The system prompt and tool guidance alone are ~5,000 characters (~1,250 tokens), so the
# window is sized for the conversation to matter: the threshold is 8,500 tokens (~34,000
# characters). Two long prompts stay under it; a third one crosses it; after folding the
# first turn away the request is back under it (margins of several thousand characters).
WINDOW = 10_000
LONG = 12_000
SUMMARY = "The user sent three long notes, A, B and C; the agent acknowledged each."
SUMMARY_MESSAGE = Message(role="user", content=f"{SUMMARY_HEADER}\n\n{SUMMARY}", tag=SUMMARY_TAG)


def long_prompt(tag: str) -> str:
    return f"[{tag}] " + tag.lower() * LONG


def reply(text: str, **kw: Any) -> dict[str, Any]:
    # Explicit usage keeps the estimate purely chars/4 (the scripted default would report
    # the tool specs too).
    return {"text": text, "usage": {"input_tokens": 10, "output_tokens": 2}, **kw}


SUMMARISER_STEP = {"text": SUMMARY, "expect": "Summarise this conversation"}


async def connect(server: Any, *, compaction_capable: bool = True) -> WsClient:
    if compaction_capable:
        return await server.client(session={"compaction": {}})
    return await server.client()


def is_summariser(request: ProviderRequest) -> bool:
    return request.system == SUMMARY_SYSTEM


def compaction_updates(client: WsClient, sid: str) -> list[dict[str, Any]]:
    return [u for u in client.updates(sid) if u["sessionUpdate"] == "compaction_update"]


def assert_one_completed_compaction(client: WsClient, sid: str, *, reason: str) -> dict[str, Any]:
    """Exactly one compaction completed, with the summary; none is left in progress."""
    updates = compaction_updates(client, sid)
    last_status: dict[str, str] = {}
    for u in updates:
        last_status[u["compactionId"]] = u["status"]
    assert all(s != "in_progress" for s in last_status.values()), updates
    completed = [u for u in updates if u["status"] == "completed"]
    assert len(completed) == 1, updates
    done = completed[0]
    assert done["summary"] == [{"type": "text", "text": SUMMARY}]
    assert done["_meta"]["agentd"]["reason"] == reason
    return done


async def read_store(db_url: str, sid: str) -> tuple[list[Any], list[Message]]:
    store = await Store.open(db_url)
    try:
        events = await store.read_events(sid)
        messages = [Message.model_validate(m) for m in await store.load_messages(sid)]
    finally:
        await store.close()
    return events, messages


def compaction_events(events: list[Any]) -> list[dict[str, Any]]:
    return [e.payload for e in events if e.kind == "compaction"]


def pairs(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages]


# --------------------------------------------------------------------------------------------
# Threshold


THRESHOLD_SCRIPT = (
    reply("Noted A."),
    reply("Noted B."),
    SUMMARISER_STEP,
    reply("Noted C.", expect="[C]"),
)
A, B, C = long_prompt("A"), long_prompt("B"), long_prompt("C")
COMPACTED = [SUMMARY_MESSAGE, Message.user(B), Message(role="assistant", content="Noted B."), Message.user(C)]


async def grow_past_the_threshold(server: Any, workspace: Path) -> tuple[WsClient, str]:
    client = await connect(server)
    sid = await new_session(client, workspace)
    for text in (A, B, C):
        result = await client.call("session/prompt", text_prompt(sid, text))
        assert result["stopReason"] == "end_turn"
    return client, sid


async def test_crossing_the_threshold_compacts_before_the_next_request(
    server_factory, workspace: Path, db_url: str
) -> None:
    provider = scripted(*THRESHOLD_SCRIPT)
    async with server_factory(provider, database_url=db_url, context_window=WINDOW) as server:
        client, sid = await grow_past_the_threshold(server, workspace)
        assert_valid_frames(client)
        await client.close()

    requests = provider.requests
    assert len(requests) == 4
    # Turn 2 was under the threshold: full history, no summariser call.
    assert pairs(requests[1].messages) == [("user", A), ("assistant", "Noted A."), ("user", B)]
    limit = DEFAULT_LIMITS.threshold * WINDOW
    assert estimate_tokens(requests[1].messages, requests[1].system) < limit
    # Turn 3 crossed it: one summariser call first — its own system prompt, no tools, and
    # only the older history (turn 1) in its transcript.
    summariser = requests[2]
    assert is_summariser(summariser)
    assert summariser.tools == [] and summariser.output_schema is None
    assert len(summariser.messages) == 1 and summariser.messages[0].role == "user"
    transcript = summariser.messages[0].content
    assert A in transcript and "Noted A." in transcript
    assert B not in transcript and C not in transcript
    # The agent's request starts with the summary and keeps the recent turns verbatim.
    agent = requests[3]
    assert not is_summariser(agent) and agent.tools
    assert agent.messages == COMPACTED
    assert estimate_tokens(agent.messages, agent.system) < limit

    # Clients saw the compaction as an ACP update, between the prompt and the answer.
    done = assert_one_completed_compaction(client, sid, reason="threshold")
    updates = client.updates(sid)
    at = updates.index(done)
    assert agent_text(updates[:at]) == "Noted A.Noted B."
    assert agent_text(updates[at:]) == "Noted C."

    events, stored = await read_store(db_url, sid)
    # The pre-compaction messages are kept in the durable event ...
    [event] = compaction_events(events)
    assert [Message.model_validate(m) for m in event["replaced"]] == [
        Message.user(A),
        Message(role="assistant", content="Noted A."),
    ]
    assert event["update"]["compactionId"] == done["compactionId"]
    # ... while the messages table holds the compacted conversation.
    assert stored == [*COMPACTED, Message(role="assistant", content="Noted C.")]


async def test_after_a_restart_load_replays_the_compaction_and_the_next_request_is_compacted(
    server_factory, workspace: Path, db_url: str
) -> None:
    async with server_factory(
        scripted(*THRESHOLD_SCRIPT), database_url=db_url, context_window=WINDOW
    ) as server:
        client, sid = await grow_past_the_threshold(server, workspace)
        await client.close()

    after = scripted(reply("We were on note C.", expect="where were we"))
    async with server_factory(after, database_url=db_url, context_window=WINDOW) as server:
        client = await connect(server)
        await client.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        replayed = client.updates(sid)
        done = [u for u in replayed if u["sessionUpdate"] == "compaction_update"]
        assert [(u["status"], u["summary"]) for u in done] == [
            ("completed", [{"type": "text", "text": SUMMARY}])
        ]
        # In its place in the history: after the third prompt, before the third answer.
        at = replayed.index(done[0])
        assert replayed[at - 1]["sessionUpdate"] == "user_message_chunk"
        assert replayed[at - 1]["content"]["text"] == C
        assert agent_text(replayed[:at]) == "Noted A.Noted B."
        assert agent_text(replayed[at:]) == "Noted C."

        result = await client.call("session/prompt", text_prompt(sid, "where were we?"))
        assert result["stopReason"] == "end_turn"
        assert len(after.requests) == 1  # no new compaction needed
        assert after.requests[0].messages == [
            *COMPACTED,
            Message(role="assistant", content="Noted C."),
            Message.user("where were we?"),
        ]
        assert_valid_frames(client)
        await client.close()


async def test_compaction_updates_go_only_to_clients_that_advertised_the_capability(
    server_factory, workspace: Path
) -> None:
    provider = scripted(*THRESHOLD_SCRIPT)
    async with server_factory(provider, context_window=WINDOW) as server:
        capable = await connect(server)
        sid = await new_session(capable, workspace)
        for text in (A, B):
            await capable.call("session/prompt", text_prompt(sid, text))
        plain = await connect(server, compaction_capable=False)
        await plain.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        await capable.call("session/prompt", text_prompt(sid, C))
        # Everything of that turn has reached the plain client once its turn_ended has.
        await plain.wait_notification(
            lambda m: m["method"] == "_agentd/event" and m["params"]["kind"] == "turn_ended"
        )
        assert_one_completed_compaction(capable, sid, reason="threshold")
        assert compaction_updates(plain, sid) == []
        assert_valid_frames(plain)
        await capable.close()
        await plain.close()


async def test_a_turn_that_stays_over_the_threshold_does_not_resummarise_the_summary(
    server_factory, workspace: Path
) -> None:
    huge = long_prompt("H") * 2  # the current turn alone is over the threshold
    provider = scripted(
        reply("Noted A."),
        reply("Noted B."),
        SUMMARISER_STEP,
        {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}], "usage": {"input_tokens": 10}},
        reply("Done."),
        reply("unused"),
        reply("unused"),
    )
    async with server_factory(
        provider, context_window=WINDOW, permission_mode=PermissionMode.BYPASS
    ) as server:
        client = await connect(server)
        sid = await new_session(client, workspace)
        for text in (A, B, huge):
            result = await client.call("session/prompt", text_prompt(sid, text))
            assert result["stopReason"] == "end_turn"
        await client.close()
    assert [is_summariser(r) for r in provider.requests] == [False, False, True, False, False]
    assert provider.requests[4].messages[0] == SUMMARY_MESSAGE


# --------------------------------------------------------------------------------------------
# Context overflow from the provider


OVERFLOW = {"error": {"kind": "context_overflow", "message": "prompt is too long: 210000 tokens > 200000"}}
P1, P2, P3 = "first question", "second question", "third question"


async def two_turns(client: WsClient, sid: str) -> None:
    for text in (P1, P2):
        result = await client.call("session/prompt", text_prompt(sid, text))
        assert result["stopReason"] == "end_turn"


async def test_a_context_overflow_compacts_and_retries_once(
    server_factory, workspace: Path, db_url: str
) -> None:
    provider = scripted(reply("one"), reply("two"), OVERFLOW, SUMMARISER_STEP, reply("three", expect=P3))
    async with server_factory(provider, database_url=db_url) as server:
        client = await connect(server)
        sid = await new_session(client, workspace)
        await two_turns(client, sid)
        result = await client.call("session/prompt", text_prompt(sid, P3))
        assert result["stopReason"] == "end_turn"
        assert_one_completed_compaction(client, sid, reason="context_overflow")
        assert_valid_frames(client)
        await client.close()

    requests = provider.requests
    assert [is_summariser(r) for r in requests] == [False, False, False, True, False]
    assert pairs(requests[2].messages) == [
        ("user", P1), ("assistant", "one"), ("user", P2), ("assistant", "two"), ("user", P3),
    ]  # fmt: skip
    assert requests[4].messages == [
        SUMMARY_MESSAGE,
        Message.user(P2),
        Message(role="assistant", content="two"),
        Message.user(P3),
    ]
    events, stored = await read_store(db_url, sid)
    [event] = compaction_events(events)
    assert event["update"]["_meta"]["agentd"]["reason"] == "context_overflow"
    assert pairs([Message.model_validate(m) for m in event["replaced"]]) == [
        ("user", P1),
        ("assistant", "one"),
    ]
    assert stored == [*requests[4].messages, Message(role="assistant", content="three")]


async def test_a_second_context_overflow_fails_the_prompt(server_factory, workspace: Path) -> None:
    provider = scripted(reply("one"), reply("two"), OVERFLOW, SUMMARISER_STEP, OVERFLOW, reply("unused"))
    async with server_factory(provider) as server:
        client = await connect(server)
        sid = await new_session(client, workspace)
        await two_turns(client, sid)
        with pytest.raises(RpcFailed) as failed:
            await client.call("session/prompt", text_prompt(sid, P3))
        error = failed.value.error
        assert error["code"] == -32012
        assert error["data"]["kind"] == "context_overflow"
        assert error["data"]["outcome"] == "failed"
        # Compacted and retried exactly once; no third attempt.
        assert [is_summariser(r) for r in provider.requests] == [False, False, False, True, False]
        assert provider.requests[4].messages[0] == SUMMARY_MESSAGE
        assert_one_completed_compaction(client, sid, reason="context_overflow")
        assert_valid_frames(client)
        await client.close()


async def test_a_context_overflow_with_nothing_to_compact_fails_the_prompt(
    server_factory, workspace: Path
) -> None:
    provider = scripted(OVERFLOW, reply("unused"))
    async with server_factory(provider) as server:
        client = await connect(server)
        sid = await new_session(client, workspace)
        with pytest.raises(RpcFailed) as failed:
            await client.call("session/prompt", text_prompt(sid, P1))
        assert failed.value.code == -32012
        assert failed.value.error["data"]["kind"] == "context_overflow"
        # A one-turn conversation has nothing old enough to fold: no summariser call, no retry.
        assert len(provider.requests) == 1 and not is_summariser(provider.requests[0])
        assert [u for u in compaction_updates(client, sid) if u["status"] == "completed"] == []
        assert_valid_frames(client)
        # The session keeps working.
        result = await client.call("session/prompt", text_prompt(sid, P2))
        assert result["stopReason"] == "end_turn"
        await client.close()


# --------------------------------------------------------------------------------------------
# _agentd/session/compact


async def test_compact_on_an_idle_session_forces_a_compaction(
    server_factory, workspace: Path, db_url: str
) -> None:
    provider = scripted(
        reply("one"), reply("two"), reply("three"), SUMMARISER_STEP, reply("four", expect="fourth")
    )
    async with server_factory(provider, database_url=db_url) as server:
        client = await connect(server)
        sid = await new_session(client, workspace)
        await two_turns(client, sid)
        await client.call("session/prompt", text_prompt(sid, P3))
        assert len(provider.requests) == 3  # far below the threshold: no automatic compaction

        result = await client.call(COMPACT, {"sessionId": sid})
        assert result["status"] == "completed"
        assert result["compacted"] is True
        assert result["turnId"]
        assert len(provider.requests) == 4 and is_summariser(provider.requests[3])
        assert provider.requests[3].tools == []
        assert_one_completed_compaction(client, sid, reason="requested")
        events, stored = await read_store(db_url, sid)
        [event] = compaction_events(events)
        assert pairs([Message.model_validate(m) for m in event["replaced"]]) == [
            ("user", P1),
            ("assistant", "one"),
        ]
        compacted = [
            SUMMARY_MESSAGE,
            Message.user(P2),
            Message(role="assistant", content="two"),
            Message.user(P3),
            Message(role="assistant", content="three"),
        ]
        assert stored == compacted

        result = await client.call("session/prompt", text_prompt(sid, "fourth question"))
        assert result["stopReason"] == "end_turn"
        assert provider.requests[4].messages == [*compacted, Message.user("fourth question")]
        assert_valid_frames(client)
        await client.close()


@pytest.mark.parametrize("turns", [0, 2])
async def test_compact_with_too_little_history_changes_nothing(
    server_factory, workspace: Path, tmp_path: Path, turns: int
) -> None:
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'little.db'}"
    provider = scripted(reply("one"), reply("two"), reply("unused"))
    async with server_factory(provider, database_url=db_url) as server:
        client = await connect(server)
        sid = await new_session(client, workspace)
        for text in (P1, P2)[:turns]:
            await client.call("session/prompt", text_prompt(sid, text))
        _, before = await read_store(db_url, sid)

        result = await client.call(COMPACT, {"sessionId": sid})
        assert result["status"] == "completed"
        assert result["compacted"] is False
        assert len(provider.requests) == turns  # no summariser call
        assert [u for u in compaction_updates(client, sid) if u["status"] == "completed"] == []
        assert_valid_frames(client)
        await client.close()
    events, after = await read_store(db_url, sid)
    assert after == before and len(after) == 2 * turns
    assert compaction_events(events) == []


async def test_compact_during_a_turn_happens_before_its_next_request(server_factory, workspace: Path) -> None:
    provider = scripted(
        reply("one"),
        reply("two"),
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "f.txt", "content": "x\n"}, "id": "call_w"}
            ]
        },
        SUMMARISER_STEP,
        reply("Wrote f.txt."),
    )
    async with server_factory(provider) as server:
        client = await connect(server)
        sid = await new_session(client, workspace)
        await two_turns(client, sid)
        answers: list[Any] = []
        approve = allow()

        async def on_request(msg: dict[str, Any]) -> dict[str, Any]:
            # The turn is waiting for this permission: it is certainly running.
            answers.append(await client.call(COMPACT, {"sessionId": sid}))
            return await approve(msg)

        client.on_request = on_request
        result = await client.call("session/prompt", text_prompt(sid, P3))
        assert result["stopReason"] == "end_turn"
        assert answers == [{"status": "scheduled"}]
        assert (workspace / "f.txt").read_text() == "x\n"

        requests = provider.requests
        assert [is_summariser(r) for r in requests] == [False, False, False, True, False]
        # The request after the tool round is the compacted conversation.
        msgs = requests[4].messages
        assert msgs[:4] == [
            SUMMARY_MESSAGE,
            Message.user(P2),
            Message(role="assistant", content="two"),
            Message.user(P3),
        ]
        assert [c.id for c in msgs[4].tool_calls] == ["call_w"]
        assert msgs[5].role == "tool" and msgs[5].tool_call_id == "call_w" and not msgs[5].is_error
        assert len(msgs) == 6
        assert_one_completed_compaction(client, sid, reason="requested")
        assert_valid_frames(client)
        await client.close()


def test_the_window_sizes_used_here_make_sense() -> None:
    """Guards the arithmetic the threshold tests rely on (the system prompt is ~5,000 chars)."""
    limit = DEFAULT_LIMITS.threshold * WINDOW
    system = 5_000
    two_prompts = [Message.user(A), Message(role="assistant", content="Noted A."), Message.user(B)]
    three_prompts = [*two_prompts, Message(role="assistant", content="Noted B."), Message.user(C)]
    assert estimate_tokens(two_prompts, "s" * (system + 4_000)) < limit
    assert estimate_tokens(three_prompts, "s" * (system - 4_000)) >= limit
    assert estimate_tokens(COMPACTED, "s" * (system + 4_000)) < limit
    assert DEFAULT_LIMITS.keep_recent_user_turns == 2
