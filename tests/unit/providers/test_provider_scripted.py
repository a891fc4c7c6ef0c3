"""The scripted provider (R-M3): replay, streaming shape, faults, and script validation."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from agentd.core.conversation import Message, ToolCall
from agentd.core.errors import ErrorKind, HarnessError
from agentd.core.provider import (
    ProviderRequest,
    ReasoningDelta,
    Stop,
    StopReason,
    StreamEvent,
    TextDelta,
    ToolCallComplete,
    ToolCallDelta,
    ToolSpec,
    Usage,
)
from agentd.providers.scripted import EXHAUSTED_TEXT, Script, ScriptedProvider, parse_script
from tests.support.paths import REPO_ROOT
from tests.support.polling import until


def request(user: str = "hi", *, system: str = "sys") -> ProviderRequest:
    return ProviderRequest(model="scripted", system=system, messages=[Message.user(user)])


async def collect(provider: ScriptedProvider, req: ProviderRequest | None = None) -> list[StreamEvent]:
    return [ev async for ev in provider.stream(req or request())]


async def collect_until_error(
    provider: ScriptedProvider, req: ProviderRequest | None = None
) -> tuple[list[StreamEvent], HarnessError]:
    events: list[StreamEvent] = []
    with pytest.raises(HarnessError) as info:
        async for ev in provider.stream(req or request()):
            events.append(ev)
    return events, info.value


def of(events: list[StreamEvent], cls: type) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


def check_contract(events: list[StreamEvent]) -> None:
    """The base.py contract: one Stop last, at most one Usage, completes in order before Stop."""
    assert isinstance(events[-1], Stop)
    assert len(of(events, Stop)) == 1
    assert len(of(events, Usage)) <= 1
    completes = of(events, ToolCallComplete)
    assert [c.index for c in completes] == list(range(len(completes)))
    assert len({c.id for c in completes}) == len(completes)


async def test_text_is_chunked() -> None:
    p = ScriptedProvider.from_dict({"steps": [{"text": "abcdefghij", "chunk_size": 4}]})
    events = await collect(p)
    check_contract(events)
    assert [e.text for e in of(events, TextDelta)] == ["abcd", "efgh", "ij"]
    assert events[-1] == Stop(StopReason.END_TURN)


async def test_default_chunk_size_is_16() -> None:
    p = ScriptedProvider.from_dict({"steps": [{"text": "x" * 40}]})
    assert [len(e.text) for e in of(await collect(p), TextDelta)] == [16, 16, 8]


async def test_reasoning_streams_before_text() -> None:
    p = ScriptedProvider.from_dict(
        {"steps": [{"reasoning": "think hard", "text": "answer", "chunk_size": 5}]}
    )
    events = await collect(p)
    check_contract(events)
    deltas = [e for e in events if isinstance(e, TextDelta | ReasoningDelta)]
    assert deltas == [ReasoningDelta("think"), ReasoningDelta(" hard"), TextDelta("answe"), TextDelta("r")]


async def test_tool_calls_stream_and_complete() -> None:
    args0 = {"path": "hello.py", "content": "print('héllo')\n", "nested": {"a": [1, 2, None]}}
    args1 = {"command": "ls"}
    p = ScriptedProvider.from_dict(
        {
            "steps": [
                {
                    "text": "working",
                    "chunk_size": 7,
                    "tool_calls": [
                        {"name": "write_file", "arguments": args0},
                        {"name": "bash", "arguments": args1, "id": "mine"},
                        {"name": "list_dir"},
                    ],
                }
            ]
        }
    )
    events = await collect(p)
    check_contract(events)
    completes = of(events, ToolCallComplete)
    assert [(c.id, c.name) for c in completes] == [
        ("call_1", "write_file"),
        ("mine", "bash"),
        ("call_2", "list_dir"),
    ]
    assert json.loads(completes[0].arguments) == args0
    assert json.loads(completes[1].arguments) == args1
    assert json.loads(completes[2].arguments) == {}
    # Completes come after every delta and right before Usage/Stop.
    last_delta = max(i for i, e in enumerate(events) if isinstance(e, ToolCallDelta | TextDelta))
    assert all(events.index(c) > last_delta for c in completes)

    deltas = of(events, ToolCallDelta)
    for c in completes:
        mine = [d for d in deltas if d.index == c.index]
        assert mine[0].id == c.id and mine[0].name == c.name
        assert all(d.id is None and d.name is None for d in mine[1:])
        assert all(len(d.arguments_delta) <= 7 for d in mine)
        assert "".join(d.arguments_delta for d in mine) == c.arguments
    assert len([d for d in deltas if d.index == 0]) > 1  # really fragmented


async def test_call_ids_unique_across_steps_and_avoid_explicit_ids() -> None:
    p = ScriptedProvider.from_dict(
        {
            "loop": True,
            "steps": [
                {"tool_calls": [{"name": "a"}, {"name": "b", "id": "call_2"}]},
                {"tool_calls": [{"name": "c"}]},
            ],
        }
    )
    ids = []
    for _ in range(4):
        ids += [c.id for c in of(await collect(p), ToolCallComplete)]
    assert ids == ["call_1", "call_2", "call_3", "call_4", "call_2", "call_5"]


async def test_raw_string_arguments_are_sent_verbatim() -> None:
    p = ScriptedProvider.from_dict(
        {"steps": [{"tool_calls": [{"name": "bash", "arguments": '{"command": '}]}]}
    )
    (complete,) = of(await collect(p), ToolCallComplete)
    assert complete.arguments == '{"command": '


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        ({"text": "x"}, StopReason.END_TURN),
        ({"tool_calls": [{"name": "t"}]}, StopReason.TOOL_USE),
        ({"text": "x", "stop": "max_tokens"}, StopReason.MAX_TOKENS),
        ({"text": "no", "stop": "refusal"}, StopReason.REFUSAL),
        ({"tool_calls": [{"name": "t"}], "stop": "end_turn"}, StopReason.END_TURN),
    ],
)
async def test_stop_reason(step: dict[str, Any], expected: StopReason) -> None:
    events = await collect(ScriptedProvider.from_dict({"steps": [step]}))
    check_contract(events)
    assert events[-1] == Stop(expected)


async def test_usage_explicit() -> None:
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 3, "cache_write_tokens": 2}
    events = await collect(ScriptedProvider.from_dict({"steps": [{"text": "x", "usage": usage}]}))
    assert of(events, Usage) == [Usage(**usage)]
    assert isinstance(events[-2], Usage)


async def test_usage_partial_defaults_to_zero() -> None:
    events = await collect(ScriptedProvider.from_dict({"steps": [{"usage": {"output_tokens": 7}}]}))
    assert of(events, Usage) == [Usage(output_tokens=7)]


async def test_usage_estimated_from_request_and_output() -> None:
    p = ScriptedProvider.from_dict({"steps": [{"text": "y" * 40}]})
    req = ProviderRequest(model="m", system="s" * 20, messages=[Message.user("u" * 20)])
    (usage,) = of(await collect(p, req), Usage)
    assert usage == Usage(input_tokens=10, output_tokens=10)


async def test_error_immediate() -> None:
    p = ScriptedProvider.from_dict(
        {
            "steps": [
                {
                    "text": "never",
                    "error": {"kind": "rate_limited", "message": "slow down", "retry_after": 2.5},
                }
            ]
        }
    )
    events, err = await collect_until_error(p)
    assert events == []
    assert err.kind is ErrorKind.RATE_LIMITED
    assert err.message == "slow down"
    assert err.retry_after == 2.5


async def test_error_after_chunks_cuts_the_stream() -> None:
    p = ScriptedProvider.from_dict(
        {
            "steps": [
                {
                    "text": "abcdefghijkl",
                    "chunk_size": 4,
                    "tool_calls": [{"name": "t", "arguments": {"k": "v"}}],
                    "error": {"kind": "network", "message": "connection reset", "after_chunks": 2},
                }
            ]
        }
    )
    events, err = await collect_until_error(p)
    assert events == [TextDelta("abcd"), TextDelta("efgh")]
    assert err.kind is ErrorKind.NETWORK


async def test_error_after_all_chunks_never_completes() -> None:
    p = ScriptedProvider.from_dict(
        {
            "steps": [
                {
                    "text": "ab",
                    "tool_calls": [{"name": "t"}],
                    "error": {"kind": "timeout", "message": "idle", "after_chunks": 99},
                }
            ]
        }
    )
    events, err = await collect_until_error(p)
    assert err.kind is ErrorKind.TIMEOUT
    assert of(events, ToolCallComplete) == [] and of(events, Stop) == []
    assert len(events) == 2  # the text delta and the tool-call delta


async def test_error_then_success_consumes_one_step_each() -> None:
    p = ScriptedProvider.from_dict(
        {"steps": [{"error": {"kind": "provider_unavailable", "message": "503"}}, {"text": "ok"}]}
    )
    await collect_until_error(p)
    events = await collect(p)
    assert of(events, TextDelta) == [TextDelta("ok")]
    assert len(p.requests) == 2


async def test_expect_matches_last_user_message() -> None:
    p = ScriptedProvider.from_dict({"steps": [{"expect": "hello", "text": "hi"}]})
    req = ProviderRequest(
        model="m",
        system="",
        messages=[
            Message.user("first"),
            Message(role="assistant", content="a"),
            Message.user("say hello please"),
            Message(role="assistant", tool_calls=[ToolCall(id="c", name="t")]),
            Message.tool_result(ToolCall(id="c", name="t"), "done"),
        ],
    )
    assert of(await collect(p, req), TextDelta) == [TextDelta("hi")]


async def test_expect_mismatch_raises_internal() -> None:
    p = ScriptedProvider.from_dict({"steps": [{"expect": "deploy", "text": "hi"}]})
    events, err = await collect_until_error(p, request("write a poem"))
    assert events == []
    assert err.kind is ErrorKind.INTERNAL
    assert "deploy" in err.message and "write a poem" in err.message


async def test_exhausted_without_loop() -> None:
    p = ScriptedProvider.from_dict({"steps": [{"text": "one"}]})
    await collect(p)
    for _ in range(2):
        events = await collect(p)
        check_contract(events)
        assert of(events, TextDelta) == [TextDelta(EXHAUSTED_TEXT)]
        assert events[-1] == Stop(StopReason.END_TURN)


async def test_empty_script_is_exhausted_even_with_loop() -> None:
    events = await collect(ScriptedProvider.from_dict({"loop": True, "steps": []}))
    assert of(events, TextDelta) == [TextDelta(EXHAUSTED_TEXT)]


async def test_loop_wraps() -> None:
    p = ScriptedProvider.from_dict({"loop": True, "steps": [{"text": "one"}, {"text": "two"}]})
    texts = ["".join(e.text for e in of(await collect(p), TextDelta)) for _ in range(5)]
    assert texts == ["one", "two", "one", "two", "one"]


async def test_requests_are_recorded() -> None:
    p = ScriptedProvider.from_dict({"steps": [{"text": "a"}]})
    tools = [ToolSpec(name="bash", description="run", parameters={"type": "object"})]
    r1 = ProviderRequest(model="m", system="s", messages=[Message.user("one")], tools=tools)
    r2 = request("two")
    await collect(p, r1)
    await collect(p, r2)  # exhausted calls are recorded too
    assert p.requests == [r1, r2]
    assert p.requests[0].tools[0].name == "bash"
    p.reset()
    assert p.requests == []
    assert of(await collect(p), TextDelta) == [TextDelta("a")]


async def test_delays_are_applied_and_cancellable() -> None:
    p = ScriptedProvider.from_dict(
        {"steps": [{"text": "abc", "chunk_size": 1, "delay": 0.05, "chunk_delay": 0.02}]}
    )
    start = time.monotonic()
    await collect(p)
    assert time.monotonic() - start >= 0.05 + 2 * 0.02 - 0.005

    slow = ScriptedProvider.from_dict({"steps": [{"text": "x", "delay": 60}]})
    task = asyncio.create_task(collect(slow))
    await until(lambda: slow.requests, what="the call to start its delay")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_native_schema_flag() -> None:
    assert ScriptedProvider(Script()).supports_native_schema is False
    assert ScriptedProvider(Script(), supports_native_schema=True).supports_native_schema is True
    assert ScriptedProvider.name == "scripted"


@pytest.mark.parametrize(
    ("data", "fragments"),
    [
        (
            {"steps": [{"text": "a"}, {"tool_calls": [{"arguments": {}}]}]},
            ["steps[1].tool_calls[0].name", "required"],
        ),
        ({"steps": [{"chunk_size": 0}]}, ["steps[0].chunk_size"]),
        ({"steps": [{"stop": "finished"}]}, ["steps[0].stop"]),
        ({"steps": [{"error": {"kind": "oops", "message": "m"}}]}, ["steps[0].error.kind"]),
        ({"steps": [{"error": {"kind": "network", "message": "m", "after_chunks": -1}}]}, ["after_chunks"]),
        ({"steps": [{"txet": "typo"}]}, ["steps[0].txet", "not permitted"]),
        ({"steps": [{"delay": -1}]}, ["steps[0].delay"]),
        (
            {"steps": [{"tool_calls": [{"name": "t", "arguments": [1]}]}]},
            ["steps[0].tool_calls[0].arguments"],
        ),
        ({"steps": {"text": "x"}}, ["steps"]),
        (["not", "an", "object"], ["invalid script"]),
    ],
)
def test_invalid_script_is_a_clear_value_error(data: Any, fragments: list[str]) -> None:
    with pytest.raises(ValueError, match="invalid script") as info:
        ScriptedProvider.from_dict(data)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_from_file(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"steps": [{"text": "from file"}]}))
    assert ScriptedProvider.from_file(path).script.steps[0].text == "from file"

    path.write_text('{"steps": [')
    with pytest.raises(ValueError, match="not JSON"):
        ScriptedProvider.from_file(path)

    path.write_text('{"steps": [{"stop": 3}]}')
    with pytest.raises(ValueError, match=r"steps\[0\]\.stop") as info:
        ScriptedProvider.from_file(path)
    assert str(path) in str(info.value)


def test_demo_file_validates() -> None:
    raw = json.loads((REPO_ROOT / "agentd/demo/demo_script.json").read_text())
    assert parse_script(raw) == ScriptedProvider.demo().script


async def test_demo_loads_and_follows_the_contract() -> None:
    demo = ScriptedProvider.demo()
    assert demo.script.loop is True
    steps = demo.script.steps
    assert steps[-1].stop_reason() is StopReason.END_TURN and not steps[-1].tool_calls

    # The demo uses the built-in tool names with their fixed argument shapes.
    calls = [tc for s in steps for tc in s.tool_calls]
    expected_args = {
        "list_dir": {"path"},
        "write_file": {"path", "content"},
        "read_file": {"path"},
        "edit_file": {"path", "old_string", "new_string"},
        "bash": {"command"},
    }
    assert {"list_dir", "write_file", "edit_file", "bash"} <= {c.name for c in calls}
    for c in calls:
        assert isinstance(c.arguments, dict) and set(c.arguments) == expected_args[c.name]
    write = next(c for c in calls if c.name == "write_file")
    edit = next(c for c in calls if c.name == "edit_file")
    assert isinstance(write.arguments, dict) and isinstance(edit.arguments, dict)
    assert edit.arguments["old_string"] in write.arguments["content"]

    # Replay a whole turn fast (no delays) and check every step obeys the contract.
    fast = ScriptedProvider(
        Script(
            loop=True,
            steps=[s.model_copy(update={"delay": 0, "chunk_delay": 0}) for s in steps],
        )
    )
    for _ in range(len(steps) + 1):  # one past the end wraps around
        check_contract(await collect(fast))


async def test_per_session_positions_are_independent() -> None:
    p = ScriptedProvider.from_dict({"steps": [{"text": "one"}, {"text": "two"}]}, per_session=True)

    def req(session_id: str | None) -> ProviderRequest:
        messages = [Message.user("hi")]
        return ProviderRequest(model="scripted", system="sys", messages=messages, session_id=session_id)

    async def text(session_id: str | None) -> str:
        return "".join(e.text for e in of(await collect(p, req(session_id)), TextDelta))

    assert await text("a") == "one"
    assert await text("b") == "one"  # a new session starts at the first step
    assert await text("a") == "two"
    assert await text("b") == "two"
    assert await text("a") == EXHAUSTED_TEXT
    p.reset()
    assert await text("a") == "one"


async def test_without_per_session_one_position_serves_every_session() -> None:
    p = ScriptedProvider.from_dict({"steps": [{"text": "one"}, {"text": "two"}]})
    assert p.per_session is False and ScriptedProvider.demo().per_session is True
    reqs = [
        ProviderRequest(model="scripted", system="sys", messages=[Message.user("hi")], session_id=s)
        for s in ("a", "b")
    ]
    texts = ["".join(e.text for e in of(await collect(p, r), TextDelta)) for r in reqs]
    assert texts == ["one", "two"]
