"""The journal's stored payloads must stay exactly as they were: existing logs replay
identically."""

from __future__ import annotations

from typing import Any, cast

import pytest

from agentd.core import (
    INTERRUPTED_RESULT,
    AgentText,
    AgentTextChunk,
    Message,
    OutcomeKind,
    TurnEnded,
    TurnOutcome,
    TurnStarted,
)
from agentd.core.errors import ErrorKind, HarnessError
from agentd.session.eventlog.journal import Journal, interrupted_tool_call_update, turn_ended
from agentd.session.eventlog.writer import EventWriter
from agentd.session.replicas import live_watch
from agentd.session.replicas.live_watch import Watched

USAGE = {"total": {"calls": 0}}


def test_an_interrupted_tool_call_ends_failed_with_the_interrupted_result() -> None:
    assert interrupted_tool_call_update("c1").payload() == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "status": "failed",
        "content": [{"type": "content", "content": {"type": "text", "text": INTERRUPTED_RESULT}}],
        "rawOutput": {"output": INTERRUPTED_RESULT, "interrupted": True},
    }


@pytest.mark.parametrize(
    ("outcome", "request_id", "expected"),
    [
        (
            TurnOutcome.completed(tools_called=2),
            None,
            {"outcome": "completed", "stopReason": "end_turn", "toolsCalled": 2},
        ),
        (
            TurnOutcome.cancelled("user_cancelled"),
            "r1",
            {
                "outcome": "cancelled",
                "stopReason": "cancelled",
                "toolsCalled": 0,
                "requestId": "r1",
                "reason": "user_cancelled",
            },
        ),
        (
            TurnOutcome.failed(HarnessError(ErrorKind.INTERNAL, "boom")),
            None,
            {
                "outcome": "failed",
                "stopReason": "end_turn",
                "toolsCalled": 0,
                "reason": "internal",
                "error": {"kind": "internal", "message": "boom"},
            },
        ),
        (
            TurnOutcome(OutcomeKind.INTERRUPTED, reason="server_restarted", structured_output={"value": 1}),
            None,
            {
                "outcome": "interrupted",
                "stopReason": "cancelled",
                "toolsCalled": 0,
                "reason": "server_restarted",
                "structuredOutput": {"value": 1},
            },
        ),
    ],
)
def test_turn_ended(outcome: TurnOutcome, request_id: str | None, expected: dict[str, Any]) -> None:
    payload = turn_ended("t1", "p1", outcome, request_id, USAGE).payload()
    # The key order is the stored one: ids, outcome, then the optional parts, usage last.
    assert payload == {"turnId": "t1", "promptId": "p1", **expected, "sessionUsage": USAGE}
    assert list(payload)[:2] == ["turnId", "promptId"] and list(payload)[-1] == "sessionUsage"


class RecordingWriter:
    """What the journal hands the group commit, in order (a stand-in `EventWriter`)."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, Any]] = []

    def submit(self, session_id: str, **kw: Any) -> None:
        if kw.get("event") is not None:
            self.writes.append(("event", kw["event"].kind.value))
        if kw.get("session_fields"):
            self.writes.append(("fields", kw["session_fields"]))
        if kw.get("messages"):
            self.writes.append(("messages", kw["messages"]))

    def submit_event(
        self, session_id: str, event: Any, publish: Any, session_fields: Any = None, messages: Any = None
    ) -> None:
        """An event and the session row's fields in one write (the same commit); or, with
        no event, conversation messages (`EventWriter._put`'s positional order)."""
        self.submit(
            session_id, event=event, publish=publish, session_fields=session_fields, messages=messages
        )


def test_turn_boundaries_set_and_clear_running_turn_in_the_same_commit_as_the_event() -> None:
    """`sessions.running_turn` is how another replica finds a session whose owner died
    mid-turn (R-C1 takeover): it follows `turn_started` / `turn_ended` straight away."""
    writer = RecordingWriter()
    journal = Journal("s1", cast(EventWriter, writer), lambda _e: None, 0, [])
    journal.emit(TurnStarted("turn_1", "p1", "prompt", "user"))
    journal.emit(AgentText("m1", "hi"))
    journal.emit(TurnEnded("turn_1", "p1", "completed", "end_turn", 0))
    assert writer.writes == [
        ("event", "turn_started"),
        ("fields", {"running_turn": "turn_1"}),
        ("event", "agent_message"),
        ("event", "turn_ended"),
        ("fields", {"running_turn": None}),
    ]


class Services:
    """The actor's services as the journal reads them: `live`, the broker's publisher or None."""

    def __init__(self) -> None:
        self.live: object | None = None


class Publisher:
    """A live publisher as the journal sees it: whether the session is watched elsewhere."""

    def __init__(self) -> None:
        self.watched = Watched(interval_s=10.0, clock=lambda: 0.0)


def streamed(services: Services) -> tuple[Journal, list[str], list[str]]:
    hub: list[str] = []
    feed: list[str] = []
    writer = EventWriter(cast(Any, None))  # idle: a chunk is published at once
    journal = Journal(
        "s1",
        writer,
        lambda e: hub.append(e.payload["text"]),
        0,
        [],
        transient=lambda e: feed.append(e.payload["text"]),
        broker=cast(Any, services),
    )
    return journal, hub, feed


async def test_a_streamed_chunk_goes_to_the_hub_directly_and_through_the_feed_only_while_watched() -> None:
    """Without a broker — or with one while no other replica watches the session — a chunk
    costs no wrapper call: it is published as a durable event is; once another replica
    watches it, chunks go through the feed (which also tells the broker)."""
    services = Services()
    journal, hub, feed = streamed(services)
    journal.emit_transient(AgentTextChunk("m1", "a", 0))
    publisher = Publisher()
    services.live = publisher  # a broker started (after the actor, as it may)
    journal.emit_transient(AgentTextChunk("m1", "b", 1))  # nobody watches: the hub only
    publisher.watched.announced("other")
    journal.emit_transient(AgentTextChunk("m1", "c", 2))  # another session is watched
    publisher.watched.announced("s1")
    journal.emit_transient(AgentTextChunk("m1", "d", 3))
    journal.cancel_checkpoints()
    assert (hub, feed) == (["a", "b", "c"], ["d"])


async def test_without_live_on_demand_every_chunk_goes_through_the_feed_once_there_is_a_broker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The general path (`LIVE_ON_DEMAND = False`): watched or not, the broker is told."""
    monkeypatch.setattr(live_watch, "LIVE_ON_DEMAND", False)
    services = Services()
    journal, hub, feed = streamed(services)
    journal.emit_transient(AgentTextChunk("m1", "a", 0))
    services.live = Publisher()
    journal.emit_transient(AgentTextChunk("m1", "b", 1))
    journal.cancel_checkpoints()
    assert (hub, feed) == (["a"], ["b"])


def test_metrics_count_every_emitted_event_and_each_turn_the_same_with_or_without_the_shortcut() -> None:
    """The journal adds to the events counter itself except for the updates `observe_event`
    counts more of: the counters read as if `observe_event` saw every event."""
    from agentd.core import RetryDecided
    from agentd.infra import Metrics

    metrics, reference = Metrics(), Metrics()
    journal = Journal("s1", cast(EventWriter, RecordingWriter()), lambda _e: None, 0, [], metrics)
    updates = [
        TurnStarted("turn_1", "p1", "prompt", "user"),
        AgentText("m1", "hi"),
        RetryDecided(decision={"decision": "retry", "bucket": "transient"}),
        TurnEnded("turn_1", "p1", "completed", "end_turn", 0),
    ]
    for update in updates:
        journal.emit(update)
        reference.observe_event(update)
    text = metrics.render().decode()
    for line in reference.render().decode().splitlines():
        if line.startswith(("agentd_events_total", "agentd_turns_total", "agentd_retry_decisions_total")):
            assert line in text
    assert "agentd_events_total 4.0" in text
    assert 'agentd_turns_total{outcome="completed"} 1.0' in text
    assert 'agentd_retry_decisions_total{bucket="transient",decision="retry"} 1.0' in text


def test_a_message_write_is_queued_as_submit_queues_it() -> None:
    writer = RecordingWriter()
    journal = Journal("s1", cast(EventWriter, writer), lambda _e: None, 0, [])
    message = Message(role="user", content="hi")
    journal.persist_message(0, message)
    assert writer.writes == [("messages", [(0, {**message.model_dump(mode="json"), "_seq": 0})])]
