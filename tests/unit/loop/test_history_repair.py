"""Message repair (R-L3c): each broken shape as a crash, a cancel or a provider switch
leaves it, the exact repaired conversation, the reasons, purity and idempotence."""

from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentd.core.conversation import Message, ToolCall
from agentd.loop.repair import (
    MISSING_RESULT_TEXT,
    RepairLimits,
    RepairReason,
    normalize_tool_call_id,
    repair_conversation,
)

R = RepairReason
LIMITS = RepairLimits()


def tc(call_id: str, command: str = "ls") -> ToolCall:
    return ToolCall(id=call_id, name="bash", arguments=f'{{"command": "{command}"}}')


def asst(*calls: ToolCall, text: str = "") -> Message:
    return Message(role="assistant", content=text, tool_calls=list(calls))


def res(call_id: str, text: str = "ok", *, name: str = "bash") -> Message:
    return Message(role="tool", content=text, tool_call_id=call_id, name=name)


def cancelled(call_id: str) -> Message:
    return Message(role="tool", content=MISSING_RESULT_TEXT, tool_call_id=call_id, name="bash", is_error=True)


def hashed(seed: str) -> str:
    return "call_" + hashlib.sha1(seed.encode()).hexdigest()[:24]


def dump(messages: list[Message]) -> list[dict]:
    return [m.model_dump() for m in messages]


def repair(
    messages: list[Message], limits: RepairLimits = LIMITS
) -> tuple[list[Message], list[RepairReason]]:
    """Repair, and check purity and idempotence on every example."""
    before = dump(messages)
    out, reasons = repair_conversation(messages, limits)
    assert dump(messages) == before, "the input was mutated"
    again, again_reasons = repair_conversation(out, limits)
    assert dump(again) == dump(out) and again_reasons == []
    return out, reasons


# --------------------------------------------------------------------------- defaults


def test_reason_values_and_default_limits() -> None:
    assert [r.value for r in RepairReason] == [
        "tool_call_ids_normalized",
        "system_messages_merged",
        "message_order_repaired",
        "orphan_tool_results_dropped",
        "missing_tool_results_synthesized",
        "old_tool_results_truncated",
    ]
    assert LIMITS.max_tool_call_id_length == 64
    assert LIMITS.keep_recent_tool_results == 6
    assert LIMITS.oversized_tool_result_chars == 20_000
    assert LIMITS.truncated_tool_result_chars == 2_000


def test_limits_that_would_break_idempotence_are_refused() -> None:
    with pytest.raises(ValueError):
        RepairLimits(oversized_tool_result_chars=1_000, truncated_tool_result_chars=2_000)
    with pytest.raises(ValueError):
        RepairLimits(max_tool_call_id_length=10)


def test_a_healthy_conversation_is_untouched() -> None:
    convo = [
        Message.system("sys"),
        Message.user("hi"),
        asst(tc("a"), tc("b", "pwd"), text="running"),
        res("a"),
        res("b"),
        asst(text="done"),
        Message.user("next"),
    ]
    out, reasons = repair(convo)
    assert reasons == []
    assert dump(out) == dump(convo)


# --------------------------------------------------------------------------- (e) missing


def test_crash_mid_round_synthesizes_the_missing_result() -> None:
    # Two calls, the process died after writing one result; the user then prompted again.
    convo = [
        Message.system("sys"),
        Message.user("go"),
        asst(tc("a"), tc("b")),
        res("a"),
        Message.user("again"),
    ]
    out, reasons = repair(convo)
    assert reasons == [R.MISSING_TOOL_RESULTS_SYNTHESIZED]
    expected = [Message.system("sys"), Message.user("go"), asst(tc("a"), tc("b")), res("a"), cancelled("b")]
    assert dump(out) == dump([*expected, Message.user("again")])


def test_cancel_before_any_result_synthesizes_all_in_call_order() -> None:
    convo = [Message.user("go"), asst(tc("a"), tc("b"), tc("c"))]
    out, reasons = repair(convo)
    assert reasons == [R.MISSING_TOOL_RESULTS_SYNTHESIZED]
    assert dump(out) == dump([*convo, cancelled("a"), cancelled("b"), cancelled("c")])


def test_missing_result_goes_into_its_call_order_slot() -> None:
    convo = [Message.user("go"), asst(tc("a"), tc("b")), res("b")]
    out, reasons = repair(convo)
    assert reasons == [R.MISSING_TOOL_RESULTS_SYNTHESIZED]
    assert dump(out) == dump([Message.user("go"), asst(tc("a"), tc("b")), cancelled("a"), res("b")])


# --------------------------------------------------------------------------- (d) orphans


def test_result_for_an_unknown_id_is_dropped() -> None:
    convo = [Message.user("go"), asst(tc("a")), res("a"), res("ghost"), asst(text="done")]
    out, reasons = repair(convo)
    assert reasons == [R.ORPHAN_TOOL_RESULTS_DROPPED]
    assert dump(out) == dump([Message.user("go"), asst(tc("a")), res("a"), asst(text="done")])


def test_orphan_without_any_assistant_and_a_second_result_are_dropped() -> None:
    convo = [
        res("early"),
        Message.user("go"),
        asst(tc("a")),
        res("a", "first"),
        res("a", "second"),
        Message(role="tool", content="no id"),
    ]
    out, reasons = repair(convo)
    assert reasons == [R.ORPHAN_TOOL_RESULTS_DROPPED]
    assert dump(out) == dump([Message.user("go"), asst(tc("a")), res("a", "first")])


# --------------------------------------------------------------------------- (b) system


def test_system_messages_are_merged_at_the_front() -> None:
    convo = [
        Message.system("base"),
        Message.user("go"),
        Message.system("reminder"),
        asst(text="ok"),
    ]
    out, reasons = repair(convo)
    assert reasons == [R.SYSTEM_MESSAGES_MERGED]
    assert dump(out) == dump([Message.system("base\n\nreminder"), Message.user("go"), asst(text="ok")])


def test_a_single_system_message_not_first_moves_to_the_front() -> None:
    convo = [Message.user("go"), Message.system("base")]
    out, reasons = repair(convo)
    assert reasons == [R.SYSTEM_MESSAGES_MERGED]
    assert dump(out) == dump([Message.system("base"), Message.user("go")])


def test_system_message_between_a_call_and_its_result() -> None:
    convo = [Message.system("a"), asst(tc("x")), Message.system("b"), res("x")]
    out, reasons = repair(convo)
    assert reasons == [R.SYSTEM_MESSAGES_MERGED]
    assert dump(out) == dump([Message.system("a\n\nb"), asst(tc("x")), res("x")])


# --------------------------------------------------------------------------- (a) ids


def test_unsafe_and_overlong_ids_are_rewritten_consistently() -> None:
    colon, long_id = "toolu_01:abc/..", "x" * 100
    convo = [
        Message.user("go"),
        asst(tc(colon), tc(long_id), tc("ok_id-1")),
        res(colon),
        res(long_id),
        res("ok_id-1"),
    ]
    out, reasons = repair(convo)
    assert reasons == [R.TOOL_CALL_IDS_NORMALIZED]
    new_colon, new_long = hashed(colon), hashed(long_id)
    expected = [
        Message.user("go"),
        asst(tc(new_colon), tc(new_long), tc("ok_id-1")),
        res(new_colon),
        res(new_long),
        res("ok_id-1"),
    ]
    assert dump(out) == dump(expected)
    for new_id in (new_colon, new_long):
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", new_id)


def test_id_of_exactly_64_safe_chars_is_kept() -> None:
    assert normalize_tool_call_id("a" * 64) == "a" * 64
    assert normalize_tool_call_id("a" * 65) == hashed("a" * 65)
    assert normalize_tool_call_id("") == hashed("")


def test_duplicate_ids_across_steps_are_made_unique_and_results_follow() -> None:
    # Some providers number calls per response: every step says "call_0".
    convo = [
        Message.user("go"),
        asst(tc("call_0", "a")),
        res("call_0", "A"),
        asst(tc("call_0", "b")),
        res("call_0", "B"),
    ]
    out, reasons = repair(convo)
    assert reasons == [R.TOOL_CALL_IDS_NORMALIZED]
    second = hashed("call_0\x001")
    expected = [Message.user("go"), asst(tc("call_0", "a")), res("call_0", "A"), asst(tc(second, "b"))]
    assert dump(out) == dump([*expected, res(second, "B")])


def test_duplicate_ids_within_one_step_pair_up_by_position() -> None:
    convo = [asst(tc("c", "a"), tc("c", "b")), res("c", "A"), res("c", "B")]
    out, reasons = repair(convo)
    assert reasons == [R.TOOL_CALL_IDS_NORMALIZED]
    second = hashed("c\x001")
    assert dump(out) == dump([asst(tc("c", "a"), tc(second, "b")), res("c", "A"), res(second, "B")])


# --------------------------------------------------------------------------- (c) order


def test_result_that_drifted_after_a_user_message_moves_back() -> None:
    convo = [Message.user("go"), asst(tc("a"), tc("b")), res("a"), Message.user("hurry"), res("b")]
    out, reasons = repair(convo)
    assert reasons == [R.MESSAGE_ORDER_REPAIRED]
    assert dump(out) == dump(
        [Message.user("go"), asst(tc("a"), tc("b")), res("a"), res("b"), Message.user("hurry")]
    )


def test_results_are_put_in_call_order() -> None:
    convo = [asst(tc("a"), tc("b")), res("b", "B"), res("a", "A"), asst(text="done")]
    out, reasons = repair(convo)
    assert reasons == [R.MESSAGE_ORDER_REPAIRED]
    assert dump(out) == dump([asst(tc("a"), tc("b")), res("a", "A"), res("b", "B"), asst(text="done")])


# --------------------------------------------------------------------------- (f) truncate


def test_old_oversized_results_are_truncated_recent_ones_kept() -> None:
    bodies = [f"{i}" + "".join(f"line {i}.{n}\n" for n in range(3000)) for i in range(10)]
    assert all(len(b) > 20_000 for b in bodies)
    small_old = "s" * 15_000  # old but not oversized: left alone
    convo: list[Message] = [Message.user("go"), asst(tc("s0")), res("s0", small_old)]
    for i, body in enumerate(bodies):
        convo += [asst(tc(f"c{i}")), res(f"c{i}", body)]
    out, reasons = repair(convo)
    assert reasons == [R.OLD_TOOL_RESULTS_TRUNCATED]
    results = [m for m in out if m.role == "tool"]
    assert results[0].content == small_old
    for i, msg in enumerate(results[1:]):
        body = bodies[i]
        if i >= 4:  # the last 6 results
            assert msg.content == body
            continue
        assert len(msg.content) <= 2_000
        head, marker_and_tail = msg.content.split("\n[... ", 1)
        marker, tail = marker_and_tail.split(" ...]\n", 1)
        assert body.startswith(head) and body.endswith(tail)
        assert marker == f"{len(body) - len(head) - len(tail)} characters cut from this old tool result"
        assert len(head) + len(tail) > 1_800
    # Everything except the truncated contents is exactly as before.
    assert [(m.role, m.tool_call_id) for m in out] == [(m.role, m.tool_call_id) for m in convo]


def test_nothing_truncated_when_all_results_are_recent() -> None:
    convo = [asst(tc("a")), res("a", "x" * 50_000)]
    out, reasons = repair(convo)
    assert reasons == []
    assert out[1].content == "x" * 50_000


# --------------------------------------------------------------------------- combined


def test_several_repairs_report_each_reason_once_in_pipeline_order() -> None:
    bad = "toolu:1"
    convo = [
        Message.user("go"),
        Message.system("base"),
        asst(tc(bad), tc("b"), tc("c")),
        res(bad),
        Message.user("are you there?"),
        res("c"),
        res("ghost"),
        res("ghost2"),
    ]
    out, reasons = repair(convo)
    assert reasons == [
        R.TOOL_CALL_IDS_NORMALIZED,
        R.SYSTEM_MESSAGES_MERGED,
        R.MESSAGE_ORDER_REPAIRED,
        R.ORPHAN_TOOL_RESULTS_DROPPED,
        R.MISSING_TOOL_RESULTS_SYNTHESIZED,
    ]
    new = hashed(bad)
    expected = [
        Message.system("base"),
        Message.user("go"),
        asst(tc(new), tc("b"), tc("c")),
        res(new),
        cancelled("b"),
        res("c"),
        Message.user("are you there?"),
    ]
    assert dump(out) == dump(expected)


# --------------------------------------------------------------------------- properties

_SMALL = RepairLimits(
    keep_recent_tool_results=2, oversized_tool_result_chars=150, truncated_tool_result_chars=100
)
_ID_POOL = ["a", "b", "call_0", "toolu:1", "x/y", "", "z" * 70, "call_" + "0" * 24]
_id = st.sampled_from(_ID_POOL)
_text = st.text(alphabet="ab \n", max_size=300)
_message = st.one_of(
    st.builds(Message.system, st.sampled_from(["", "s1", "s2"])),
    st.builds(Message.user, st.sampled_from(["u1", "u2"])),
    st.builds(
        lambda calls, text: Message(role="assistant", content=text, tool_calls=calls),
        st.lists(st.builds(ToolCall, id=_id, name=st.sampled_from(["bash", "read"])), max_size=3),
        st.sampled_from(["", "t"]),
    ),
    st.builds(
        lambda cid, text, err: Message(
            role="tool", content=text, tool_call_id=cid, name="bash", is_error=err
        ),
        st.one_of(_id, st.none()),
        _text,
        st.booleans(),
    ),
)


def _assert_well_formed(messages: list[Message], limits: RepairLimits) -> None:
    systems = [i for i, m in enumerate(messages) if m.role == "system"]
    assert systems in ([], [0])
    ids = [c.id for m in messages for c in m.tool_calls]
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", i) for i in ids)
    i = 0
    while i < len(messages):
        msg = messages[i]
        assert msg.role != "tool", "a tool result not directly behind its assistant message"
        i += 1
        if msg.role == "assistant":
            for call in msg.tool_calls:
                assert messages[i].role == "tool" and messages[i].tool_call_id == call.id
                i += 1
    tools = [m for m in messages if m.role == "tool"]
    for m in tools[: max(0, len(tools) - limits.keep_recent_tool_results)]:
        assert len(m.content) <= limits.oversized_tool_result_chars


@settings(max_examples=400, deadline=None)
@given(st.lists(_message, max_size=14))
def test_repair_is_pure_idempotent_and_well_formed(messages: list[Message]) -> None:
    before = dump(messages)
    out, reasons = repair_conversation(messages, _SMALL)
    assert dump(messages) == before
    assert len(reasons) == len(set(reasons))
    assert reasons == sorted(reasons, key=list(RepairReason).index)
    _assert_well_formed(out, _SMALL)
    again, again_reasons = repair_conversation(out, _SMALL)
    assert again_reasons == []
    assert dump(again) == dump(out)
    if not reasons:
        assert dump(out) == before


def test_a_stray_copy_before_the_call_loses_to_the_result_after_it() -> None:
    convo = [res("a", "stray"), Message.user("go"), asst(tc("a")), res("a", "real")]
    out, reasons = repair(convo)
    assert reasons == [R.ORPHAN_TOOL_RESULTS_DROPPED]
    assert dump(out) == dump([Message.user("go"), asst(tc("a")), res("a", "real")])


def test_a_result_only_before_its_call_moves_behind_it() -> None:
    convo = [Message.user("go"), res("a", "early"), asst(tc("a"))]
    out, reasons = repair(convo)
    assert reasons == [R.MESSAGE_ORDER_REPAIRED]
    assert dump(out) == dump([Message.user("go"), asst(tc("a")), res("a", "early")])
