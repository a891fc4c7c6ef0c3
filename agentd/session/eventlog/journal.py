"""The session's journal: every event the actor and its running turn emit, in order.

It numbers durable events (the session's `seq`), hands them to the `EventWriter` (which
commits, then publishes to the hub), checkpoints the text of messages still streaming
(R-E1) and repairs what a crash or a killed turn left open: messages cut off mid-stream,
tool calls without a result, the turn that never ended (R-E6, R-L3c). It is the turn's
`EventSink` (agentd/loop/context.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from agentd.core import (
    INTERRUPTED_RESULT,
    AgentText,
    AgentTextChunk,
    Conversation,
    Event,
    EventKind,
    Message,
    OutcomeKind,
    ToolCallAnnounced,
    ToolCallFinished,
    ToolCallIds,
    TurnEnded,
    TurnOutcome,
    TurnStarted,
    Update,
    UsageLedger,
    repair_dangling_tool_calls,
    stop_reason,
    text_content,
)
from agentd.infra import Metrics
from agentd.protocol import StopReason
from agentd.session.eventlog.writer import EventWriter

# R-E1: the text of a message still streaming reaches the store at most this often.
PARTIAL_CHECKPOINT_INTERVAL_S = 1.0

# An in-flight message: its kind (a chunk kind) and the text streamed so far.
Partial = tuple[EventKind, str]


def interrupted_tool_call_update(call_id: str) -> ToolCallFinished:
    """The update that ends a tool call which never got its result (the same failed
    `tool_call_update` the loop stores for a failed call, so old logs replay identically)."""
    return ToolCallFinished(
        call_id,
        failed=True,
        content=[text_content(INTERRUPTED_RESULT)],
        raw_output={"output": INTERRUPTED_RESULT, "interrupted": True},
    )


# An enum's `.value` is a Python descriptor call: its text looked up instead.
_OUTCOME_TEXT = {kind: kind.value for kind in OutcomeKind}
_STOP_TEXT = {reason: reason.value for reason in StopReason}


def turn_ended(
    turn_id: str,
    prompt_id: str | None,
    outcome: TurnOutcome,
    request_id: str | None,
    session_usage: dict[str, Any],
    request_digest: str | None = None,
) -> TurnEnded:
    """The `turn_ended` update of one turn."""
    error = outcome.error
    return TurnEnded(
        turn_id,
        prompt_id,
        _OUTCOME_TEXT[outcome.kind],
        _STOP_TEXT[stop_reason(outcome)],
        outcome.tools_called,
        request_id=request_id,
        reason=outcome.wire_reason if outcome.reason else None,
        error=None if error is None else {"kind": error.kind.value, "message": error.message},
        structured_output=outcome.structured_output,
        turn=outcome.turn or None,
        session_usage=session_usage,
        # A restart still tells a retry from a reuse.
        request_digest=request_digest if request_id is not None else None,
    )


class LiveOut(Protocol):
    """The broker's publisher, as the journal sees it: whether a session is watched on
    another replica now (agentd/session/replicas/live_watch.py)."""

    @property
    def watched(self) -> Callable[[str], bool]: ...


class Replicated(Protocol):
    """Whether this server tells other replicas of transient events (the actor's services:
    `live` is the broker's publisher, or None)."""

    @property
    def live(self) -> LiveOut | None: ...


class Journal:
    def __init__(
        self,
        session_id: str,
        writer: EventWriter,
        publish: Callable[[Event], None],
        last_seq: int,
        messages: list[Message],
        metrics: Metrics | None = None,
        *,
        transient: Callable[[Event], None] | None = None,
        broker: Replicated | None = None,
    ) -> None:
        self._session_id = session_id
        self._writer = writer
        self._publish = publish
        # A streamed chunk's publish: `transient` — or, while `broker.live` is None or does
        # not see the session watched elsewhere (no other replica to tell), `publish`
        # itself, without the wrapper.
        self._transient = publish if transient is None else transient
        self._broker = broker
        self._metrics = metrics
        self.seq = last_seq
        # The conversation's backing list (the actor's `Conversation` wraps the same list).
        self._messages = messages
        # In-flight message id → its chunks so far: appended, joined only when read (a
        # long answer re-copied per chunk would cost O(n²)).
        self._parts: dict[str, tuple[EventKind, list[str]]] = {}
        self._checkpointed = False  # the store holds a partial-text checkpoint
        self._checkpoint_timer: asyncio.TimerHandle | None = None
        self._last_checkpoint = float("-inf")
        self.stopped = False  # no more periodic checkpoints
        self.open_tool_calls: dict[str, None] = {}  # toolCallIds announced and not finished
        self.tool_call_ids = ToolCallIds(c.id for m in messages for c in m.tool_calls)  # used on the wire

    @property
    def partial(self) -> dict[str, Partial]:
        """In-flight message id → (chunk kind, text streamed so far)."""
        out: dict[str, Partial] = {}
        for mid, (kind, parts) in self._parts.items():
            if len(parts) > 1:
                parts[:] = ["".join(parts)]  # later reads start from the joined text
            out[mid] = (kind, parts[0])
        return out

    # ------------------------------------------------------------------ EventSink

    def emit(
        self, update: Update, *, origin: str | None = None, session_fields: dict[str, Any] | None = None
    ) -> None:
        """Number `update` and submit it; `session_fields`: the session row's, written in
        the event's own commit."""
        fields = session_fields
        ended_partial = False
        match update:  # the type once, not an isinstance per case
            case AgentText():
                ended_partial = self._parts.pop(update.message_id, None) is not None
            case ToolCallAnnounced():
                self.open_tool_calls[update.tool_call_id] = None
                self.tool_call_ids.add(update.tool_call_id)
            case ToolCallFinished():
                self.open_tool_calls.pop(update.tool_call_id, None)
            # Same commit as the event: a replica whose owner died mid-turn finds the
            # session by this column (R-C1 takeover), not by reading logs.
            case TurnStarted():
                fields = {**(fields or {}), "running_turn": update.turn_id}
            case TurnEnded():
                fields = {**(fields or {}), "running_turn": None}
        self.seq += 1
        event = Event(self._session_id, update, seq=self.seq, origin=origin)
        self._writer.submit_event(self._session_id, event, self._publish, fields)
        metrics = self._metrics
        if metrics is not None:
            if type(update) in metrics.OBSERVED:
                metrics.observe_event(update)
            else:  # `observe_event` without its call (5 a trivial turn): the count alone
                metrics.events.value += 1.0
        if ended_partial and self._checkpointed:
            # Same commit as the final text: the store never holds both, or neither.
            self._checkpoint_partials(from_timer=False)

    def emit_transient(self, update: Update) -> None:
        match update:
            case AgentTextChunk():
                # The text streamed so far, for clients that attach mid-message (R-E3).
                entry = self._parts.get(update.message_id)
                if entry is None:
                    self._parts[update.message_id] = (update.kind, [update.text])
                else:
                    entry[1].append(update.text)
                if self._checkpoint_timer is None and not self.stopped:
                    self._schedule_checkpoint()
        broker = self._broker
        if broker is None:
            publish = self._transient
        else:  # through the broker only while another replica watches the session
            live = broker.live
            publish = (
                self._transient if live is not None and live.watched(self._session_id) else self._publish
            )
        self._writer.submit_transient(self._session_id, Event(self._session_id, update), publish)

    def flushed(self) -> asyncio.Future[None]:
        # The writer's barrier future itself, not a coroutine awaiting it: the drain barrier
        # waits on it without a task of its own (issue 32: a task and a loop pass per tool round).
        return self._writer.barrier()

    def mark(self) -> int:
        """Before the writes an acknowledgement stands for (see `committed`)."""
        return self._writer.mark()

    async def committed(self, since: int) -> None:
        """Return once this session's writes from `since` on are committed; raise a
        retryable `not_committed` error if the writer dropped any of them (issue 26)."""
        await self._writer.require_committed(self._session_id, since)

    # ------------------------------------------------------------------ session row and messages

    def persist_fields(self, fields: dict[str, Any]) -> None:
        self._writer.submit(self._session_id, session_fields=fields)

    def persist_message(self, idx: int, message: Message) -> None:
        # `seq`: the log position the message belongs to (forks cut the conversation there).
        data = message.model_dump(mode="json")  # a new dict: the key joins it, no copy
        data["_seq"] = self.seq
        # `submit` without its call: `_put` itself, positionally (session, event, publish,
        # session_fields, messages).
        self._writer.submit_event(self._session_id, None, None, None, [(idx, data)])

    def rewrite_messages(self, messages: list[Message]) -> None:
        data = [(i, {**m.model_dump(mode="json"), "_seq": self.seq}) for i, m in enumerate(messages)]
        self._writer.submit(self._session_id, truncate_from=0, messages=data)

    # ------------------------------------------------------------------ partial text (R-E1)

    def _schedule_checkpoint(self) -> None:
        if self._checkpoint_timer is not None or self.stopped:
            return
        loop = asyncio.get_running_loop()
        delay = max(0.0, self._last_checkpoint + PARTIAL_CHECKPOINT_INTERVAL_S - loop.time())
        self._checkpoint_timer = loop.call_later(delay, self._checkpoint_partials)

    def cancel_checkpoints(self) -> None:
        """The actor stops: no periodic checkpoint after this."""
        if self._checkpoint_timer is not None:
            self._checkpoint_timer.cancel()
            self._checkpoint_timer = None

    def _checkpoint_partials(self, *, from_timer: bool = True) -> None:
        """Write the streamed-so-far text of in-flight messages to the session row (or
        clear it): after a crash it becomes those messages' final, interrupted text."""
        if from_timer:  # the periodic checkpoint (else: a final text just cleared one)
            self._checkpoint_timer = None
            self._last_checkpoint = asyncio.get_running_loop().time()
        if not self._parts and not self._checkpointed:
            return
        record = None
        if self._parts:
            record = {
                "seq": self.seq,
                "messages": [
                    {"messageId": mid, "kind": kind.value, "text": text}
                    for mid, (kind, text) in self.partial.items()
                ],
            }
        self.persist_fields({"partial": record})
        self._checkpointed = record is not None

    # ------------------------------------------------------------------ repair

    def finish_interrupted_messages(
        self, partials: list[tuple[str, Partial]], conversation: Conversation
    ) -> None:
        """Messages that stopped streaming without their final event (the turn was killed,
        or the server died) end with the text clients were shown, marked interrupted; the
        model sees its own cut-off words in the next request."""
        for mid, (kind, text) in partials:
            thought = kind is EventKind.AGENT_THOUGHT_CHUNK
            # emit() ends the in-flight entry and updates the checkpoint with it.
            self.emit(AgentText(mid, text, thought=thought, interrupted=True))
            if not thought and text:
                conversation.append(Message(role="assistant", content=text))

    def close_dangling_tool_calls(self) -> None:
        """Tool calls without a result (killed, or the server died) get a synthesised
        "interrupted" result in the conversation (R-L3c) and a `failed` update on the
        wire, so no client is left with a call that runs forever."""
        dangling, first_changed = repair_dangling_tool_calls(self._messages)
        if first_changed is not None:
            self._writer.submit(
                self._session_id,
                truncate_from=first_changed,
                messages=[
                    (i, {**m.model_dump(mode="json"), "_seq": self.seq})
                    for i, m in enumerate(self._messages)
                    if i >= first_changed
                ],
            )
        ids = list(dict.fromkeys([*self.open_tool_calls, *(c.id for c in dangling)]))
        for call_id in ids:
            self.emit(interrupted_tool_call_update(call_id))

    def emit_turn_ended(
        self,
        turn_id: str,
        prompt_id: str | None,
        outcome: TurnOutcome,
        request_id: str | None,
        *,
        usage: UsageLedger,
        conversation: Conversation,
        request_digest: str | None = None,
    ) -> TurnEnded:
        """The turn's end, after any message it left cut off mid-stream (durably, first);
        the turn's usage joins the session's ledger. Returns the update (its prompt's answer
        is rendered from it: `agentd/session/prompt_answer.py`)."""
        self.finish_interrupted_messages(list(self.partial.items()), conversation)
        spent = "usage" in outcome.turn
        if spent:
            usage.merge_wire(outcome.turn["usage"])  # (no ledger built from it in between)
        session_usage = usage.to_dict()  # once: read-only from here, the event's and the row's
        fields = {"usage": session_usage} if spent else None  # in the turn's end's own commit
        ended = turn_ended(turn_id, prompt_id, outcome, request_id, session_usage, request_digest)
        self.emit(ended, session_fields=fields)
        return ended
