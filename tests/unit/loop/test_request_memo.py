"""RequestMemo: repair and the token estimate done incrementally give exactly what the
whole-history passes give, request after request, while the history grows, is edited,
compacted or repaired — and only the new tail is processed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentd.core.conversation import Message, ReasoningBlock, ToolCall
from agentd.core.provider import ToolSpec
from agentd.loop import request_memo
from agentd.loop.compaction import CompactionLimits, estimate_tokens
from agentd.loop.repair import RepairLimits, RepairReason, repair_conversation
from agentd.loop.request_memo import RequestMemo

_SMALL = RepairLimits(
    keep_recent_tool_results=2, oversized_tool_result_chars=150, truncated_tool_result_chars=100
)
_ID_POOL = ["a", "b", "call_0", "toolu:1", "x/y", "", "z" * 70]
_id = st.sampled_from(_ID_POOL)
_message = st.one_of(
    st.builds(Message.system, st.sampled_from(["", "s1"])),
    st.builds(Message.user, st.sampled_from(["u1", "u2"])),
    st.builds(
        lambda calls, text, blocks: Message(
            role="assistant", content=text, tool_calls=calls, reasoning="r", reasoning_blocks=blocks
        ),
        st.lists(st.builds(ToolCall, id=_id, name=st.sampled_from(["bash", "read"])), max_size=3),
        st.sampled_from(["", "t"]),
        st.lists(
            st.builds(
                lambda n: ReasoningBlock(provider="openai-responses", data={"encrypted_content": "e" * n}),
                st.integers(0, 50),
            ),
            max_size=1,
        ),
    ),
    st.builds(
        lambda cid, n: Message(role="tool", content="o" * n, tool_call_id=cid, name="bash"),
        st.one_of(_id, st.none()),
        st.integers(0, 300),
    ),
)


def _well_formed_round(i: int, calls: int, size: int) -> list[Message]:
    """One healthy turn: a prompt, an assistant step with `calls` calls, their results, an answer."""
    ids = [f"call_{i}_{k}" for k in range(calls)]
    step = Message(role="assistant", tool_calls=[ToolCall(id=c, name="bash") for c in ids])
    results = [Message(role="tool", content="x" * size, tool_call_id=c, name="bash") for c in ids]
    return [
        Message.user(f"u{i}"),
        *([step, *results] if calls else []),
        Message(role="assistant", content="ok"),
    ]


_edit = st.one_of(
    st.tuples(st.just("append"), st.lists(_message, min_size=1, max_size=4)),
    st.tuples(st.just("round"), st.integers(0, 3), st.integers(0, 300)),
    st.tuples(st.just("replace"), st.integers(0, 30), st.lists(_message, max_size=3)),  # a rewrite at k
    st.tuples(st.just("compact"), st.integers(0, 30)),  # keep the tail from k, a summary first
    st.tuples(st.just("copy")),  # equal but new objects (a reload from the store)
)


def _apply(history: list[Message], edit: tuple, step: int) -> list[Message]:
    match edit:
        case ("append", extra):
            return [*history, *extra]
        case ("round", calls, size):
            return [*history, *_well_formed_round(step, calls, size)]
        case ("replace", k, extra):
            return [*history[:k], *extra]
        case ("compact", k):
            return [Message(role="user", content="summary", tag="compaction_summary"), *history[k:]]
        case _:
            return [m.model_copy() for m in history]


def _check(memo: RequestMemo, history: list[Message], limits: RepairLimits) -> None:
    before = [m.model_dump() for m in history]
    out, reasons = memo.repair(list(history), limits)
    want, want_reasons = repair_conversation(history, limits)
    assert [m.model_dump() for m in out] == [m.model_dump() for m in want]
    assert reasons == want_reasons
    assert [m.model_dump() for m in history] == before, "the input was mutated"
    for system in ("", "sys"):
        assert memo.estimate(out, system) == estimate_tokens(out, system)
        assert memo.estimate(history, system) == estimate_tokens(history, system)


@settings(max_examples=300, deadline=None)
@given(st.lists(_edit, min_size=1, max_size=12), st.sampled_from([_SMALL, RepairLimits()]))
def test_memo_matches_the_whole_history_passes_after_every_edit(
    edits: list[tuple], limits: RepairLimits
) -> None:
    memo = RequestMemo()
    history: list[Message] = []
    for step, edit in enumerate(edits):
        history = _apply(history, edit, step)
        _check(memo, history, limits)
        _check(memo, history, limits)  # the same input again


def test_a_growing_healthy_history_is_repaired_from_its_tail_only(monkeypatch) -> None:
    seen: list[int] = []
    real = request_memo._RepairState.advance

    def counting(self: request_memo._RepairState, tail: list[Message]) -> None:
        seen.append(len(tail))
        real(self, tail)

    monkeypatch.setattr(request_memo._RepairState, "advance", counting)
    full: list[int] = []
    monkeypatch.setattr(
        request_memo, "repair_normalized", lambda *a: full.append(1) or repair_conversation(a[0], a[2])
    )
    memo = RequestMemo()
    history: list[Message] = []
    for i in range(50):
        history += _well_formed_round(i, i % 3, 40_000 if i == 4 else 10)
        out, reasons = memo.repair(list(history), RepairLimits())
        want, want_reasons = repair_conversation(history, RepairLimits())
        assert [m.model_dump() for m in out] == [m.model_dump() for m in want] and reasons == want_reasons
    assert max(seen) <= 2 + 3 + 1  # one round's messages, never the history
    assert full == []  # canonical all along: steps (b)-(e) never ran over the history
    assert RepairReason.OLD_TOOL_RESULTS_TRUNCATED in reasons
    cut = next(m for m in out if m.role == "tool" and "characters cut" in m.content)
    again, _ = memo.repair(list(history), RepairLimits())
    assert any(m is cut for m in again), "the cut copy is made once and reused"


def test_an_unanswered_call_takes_the_full_steps_until_answered() -> None:
    memo = RequestMemo()
    call = ToolCall(id="c1", name="bash")
    history = [Message.user("go"), Message(role="assistant", tool_calls=[call])]
    out, reasons = memo.repair(list(history), RepairLimits())
    assert reasons == [RepairReason.MISSING_TOOL_RESULTS_SYNTHESIZED] and out[-1].role == "tool"
    history.append(Message.tool_result(call, "done"))
    out, reasons = memo.repair(list(history), RepairLimits())
    assert reasons == [] and out == history


def test_estimate_counts_only_new_messages(monkeypatch) -> None:
    counted: list[Message] = []
    real = request_memo.message_chars
    monkeypatch.setattr(request_memo, "message_chars", lambda m, lim: counted.append(m) or real(m, lim))
    memo = RequestMemo()
    history = [Message.user(f"u{i}") for i in range(100)]
    assert memo.estimate(history, "s") == estimate_tokens(history, "s")
    counted.clear()
    history.append(Message(role="assistant", content="a" * 40))
    assert memo.estimate(history, "s") == estimate_tokens(history, "s")
    assert counted == [history[-1]]
    other = CompactionLimits(per_message_overhead_chars=100)
    assert memo.estimate(history, "", other) == estimate_tokens(history, "", other)


# -- the system prompt and tool specs, kept per conversation --------------------------------


class _Tool:
    def __init__(self, name: str, description: str = "d", guidance: str = "g") -> None:
        self.name, self.description, self.guidance = name, description, guidance
        self.parameters: dict[str, object] = {"type": "object"}


def _parts(system_prompt: str, cwd: object, tools: dict[str, _Tool]) -> tuple[str, list[ToolSpec]]:
    from agentd.loop.react.sampling import request_parts

    return request_parts(system_prompt, cwd, tools)  # type: ignore[arg-type]


def test_system_and_tools_are_made_once_while_their_inputs_stay() -> None:
    memo = RequestMemo()
    made: list[int] = []

    def make(system_prompt: str, cwd: object, tools: dict[str, _Tool]) -> tuple[str, list[ToolSpec]]:
        made.append(1)
        return _parts(system_prompt, cwd, tools)

    tools = {"a": _Tool("a"), "b": _Tool("b")}
    cwd = Path("/w")
    first = memo.system_and_tools("sys", cwd, tools, make)  # type: ignore[arg-type]
    assert first == _parts("sys", cwd, tools)
    assert memo.system_and_tools("sys", cwd, dict(tools), make) is first  # type: ignore[arg-type]
    assert len(made) == 1


def _change_prompt(tools: dict[str, _Tool]) -> tuple[str, object, dict[str, _Tool]]:
    return "other", Path("/w"), tools


def _change_cwd(tools: dict[str, _Tool]) -> tuple[str, object, dict[str, _Tool]]:
    return "sys", Path("/elsewhere"), tools


def _add_tool(tools: dict[str, _Tool]) -> tuple[str, object, dict[str, _Tool]]:
    return "sys", Path("/w"), {**tools, "c": _Tool("c")}


def _drop_tool(tools: dict[str, _Tool]) -> tuple[str, object, dict[str, _Tool]]:
    return "sys", Path("/w"), {"a": tools["a"]}


def _reorder(tools: dict[str, _Tool]) -> tuple[str, object, dict[str, _Tool]]:
    return "sys", Path("/w"), {"b": tools["b"], "a": tools["a"]}


def _edit_in_place(field: str, value: object) -> object:
    def change(tools: dict[str, _Tool]) -> tuple[str, object, dict[str, _Tool]]:
        setattr(tools["a"], field, value)
        return "sys", Path("/w"), tools

    return change


@pytest.mark.parametrize(
    "change",
    [
        _change_prompt,
        _change_cwd,
        _add_tool,
        _drop_tool,
        _reorder,
        _edit_in_place("description", "new"),
        _edit_in_place("guidance", "new"),
        _edit_in_place("name", "z"),
        _edit_in_place("parameters", {"type": "object", "properties": {}}),
    ],
)
def test_any_input_changed_makes_them_anew(change: Any) -> None:
    memo = RequestMemo()
    tools = {"a": _Tool("a"), "b": _Tool("b")}
    memo.system_and_tools("sys", Path("/w"), tools, _parts)  # type: ignore[arg-type]
    system_prompt, cwd, changed = change(tools)
    got = memo.system_and_tools(system_prompt, cwd, changed, _parts)  # type: ignore[arg-type]
    assert got == _parts(system_prompt, cwd, changed)
