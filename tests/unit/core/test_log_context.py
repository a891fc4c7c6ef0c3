"""`bind_log_context` puts the session and turn on log records as fields (issue 11)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from agentd.core.log_context import LogContextFilter, bind_log_context, current_log_context, turn_log_context


def _record(msg: str = "hello", **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("agentd.test", logging.INFO, __file__, 1, msg, None, None)
    record.__dict__.update(extra)
    assert LogContextFilter().filter(record)
    return record


@pytest.mark.parametrize(
    ("outer", "inner", "expected"),
    [
        ({}, {}, {"session_id": None, "turn_id": None}),
        ({"session_id": "s1"}, {}, {"session_id": "s1", "turn_id": None}),
        ({"session_id": "s1"}, {"turn_id": "t1"}, {"session_id": "s1", "turn_id": "t1"}),
        ({"session_id": "s1", "turn_id": "t1"}, {"turn_id": "t2"}, {"session_id": "s1", "turn_id": "t2"}),
        ({"session_id": "s1"}, {"session_id": "s2"}, {"session_id": "s2", "turn_id": None}),
    ],
)
def test_records_inside_carry_the_innermost_binding(
    outer: dict[str, str], inner: dict[str, str], expected: dict[str, str | None]
) -> None:
    with bind_log_context(**outer), bind_log_context(**inner):
        record = _record()
    assert {k: getattr(record, k) for k in expected} == expected


def test_leaving_restores_the_outer_values() -> None:
    with bind_log_context(session_id="s1"):
        with bind_log_context(session_id="s2", turn_id="t1"):
            assert current_log_context() == {"session_id": "s2", "turn_id": "t1"}
        assert current_log_context() == {"session_id": "s1"}
    assert current_log_context() == {}
    record = _record()
    assert (record.session_id, record.turn_id) == (None, None)  # type: ignore[attr-defined]


def test_a_value_passed_explicitly_wins() -> None:
    with bind_log_context(session_id="s1"):
        record = _record(session_id="explicit")
    assert record.session_id == "explicit"  # type: ignore[attr-defined]


def test_the_context_is_left_even_on_error() -> None:
    with pytest.raises(RuntimeError), bind_log_context(session_id="s1"):
        raise RuntimeError("boom")
    assert current_log_context() == {}


async def _context_in_task() -> dict[str, str]:
    return current_log_context()


async def test_concurrent_tasks_keep_their_own_context() -> None:
    both_bound = asyncio.Barrier(2)

    async def session(sid: str) -> logging.LogRecord:
        with bind_log_context(session_id=sid):
            await both_bound.wait()  # both contexts are live at the same time here
            inner = asyncio.create_task(_context_in_task())
            assert await inner == {"session_id": sid}  # a task started inside inherits it
            return _record()

    a, b = await asyncio.gather(session("a"), session("b"))
    assert (a.session_id, b.session_id) == ("a", "b")  # type: ignore[attr-defined]


async def test_a_task_in_turn_log_context_carries_the_turn_like_one_started_inside_bind() -> None:
    """`turn_log_context` (the turn's task's context, issue 32) binds what a task started
    inside `bind_log_context(turn_id=...)` sees, and leaves the caller's context alone."""

    async def seen() -> dict[str, str]:
        return current_log_context()

    with bind_log_context(session_id="s1"):
        with bind_log_context(turn_id="t1"):
            inside = await asyncio.create_task(seen())
        given = await asyncio.create_task(seen(), context=turn_log_context("t1"))
        assert current_log_context() == {"session_id": "s1"}
    assert given == inside == {"session_id": "s1", "turn_id": "t1"}
