"""Crash repair when a session's actor is loaded from the store (R-E1, R-E6, R-L3c): what
the server was doing when it died is closed durably before anyone can attach — tool calls
without a result, messages cut off mid-stream, the turn that never ended, background tasks
that were running (they end `interrupted`: agentd/core/task_history.py) — and the recent
turns' requestIds are remembered so a client's retry learns how they ended."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from agentd.core import EventKind, TaskKind, replay
from agentd.session.commands import PromptDone
from agentd.store import SessionRecord, Store, StoredEvent

if TYPE_CHECKING:
    from agentd.core import Conversation, UsageLedger
    from agentd.loop import SessionLoopState
    from agentd.session.eventlog.journal import Journal, Partial
    from agentd.tools import BackgroundTasks


class RecoveryHost(Protocol):
    """The actor being loaded, as crash repair sees it: only these names."""

    @property
    def id(self) -> str: ...
    @property
    def journal(self) -> Journal: ...
    @property
    def conversation(self) -> Conversation: ...
    @property
    def usage(self) -> UsageLedger: ...
    @property
    def background(self) -> BackgroundTasks: ...
    @property
    def loop_state(self) -> SessionLoopState: ...
    def remember_outcome(self, request_id: str, done: PromptDone, digest: str | None = None) -> None: ...


CHUNK_KINDS = (EventKind.AGENT_MESSAGE_CHUNK.value, EventKind.AGENT_THOUGHT_CHUNK.value)
# How many recent turns' requestIds a reloaded session still answers retries for; the
# store reads these boundaries with the session (`Store.load_session`).
REMEMBERED_TURNS = 200
TURN_BOUNDARIES = (EventKind.TURN_STARTED.value, EventKind.TURN_ENDED.value)
# Background tasks' starts and ends, read in the same query: a task whose start is among the
# newest RECENT_LIMIT of these events is paired with its end (older ones are forgotten).
TASK_MARKS = (EventKind.BACKGROUND_TASK_STARTED.value, EventKind.BACKGROUND_TASK.value)
REMEMBERED_TASK_MARKS = 200
RECENT_KINDS = (*TURN_BOUNDARIES, *TASK_MARKS)
RECENT_LIMIT = REMEMBERED_TURNS + REMEMBERED_TASK_MARKS


async def recover(
    store: Store, actor: RecoveryHost, record: SessionRecord, recent: list[StoredEvent]
) -> None:
    """Repair what the log of a session loaded from the store left open (before it starts).
    `recent`: its newest RECENT_LIMIT events of the RECENT_KINDS, oldest first."""
    # The server died mid-tool: those calls end "interrupted", in the conversation and
    # for clients replaying the log.
    actor.journal.close_dangling_tool_calls()
    if record.partial:
        await _recover_partial_text(store, actor, record.partial)
    closed = _recover_interrupted_turn(actor, [e for e in recent if e.kind in TURN_BOUNDARIES])
    _recover_background_tasks(actor, [e for e in recent if e.kind in TASK_MARKS])
    if record.running_turn is not None and not closed:
        # The log has no open turn (it ended after all): nothing to take over any more.
        actor.journal.persist_fields({"running_turn": None})


async def _recover_partial_text(store: Store, actor: RecoveryHost, checkpoint: dict[str, Any]) -> None:
    """Messages that were streaming when the server died end with their checkpointed
    text (R-E1) — unless their final event made it to the log after all."""
    after = int(checkpoint.get("seq", 0))
    finished = {
        e.payload.get("messageId")
        for e in await store.read_events(actor.id, after_seq=after)
        if e.kind in (EventKind.AGENT_MESSAGE.value, EventKind.AGENT_THOUGHT.value)
    }
    partials: list[tuple[str, Partial]] = []
    for m in checkpoint.get("messages", []):
        if m.get("messageId") in finished or m.get("kind") not in CHUNK_KINDS:
            continue
        partials.append((m["messageId"], (EventKind(m["kind"]), str(m.get("text", "")))))
    actor.journal.finish_interrupted_messages(partials, actor.conversation)
    actor.journal.persist_fields({"partial": None})


def _recover_interrupted_turn(actor: RecoveryHost, ends: list[StoredEvent]) -> bool:
    """A turn that was running when the server died ends `interrupted` (R-E6); the
    requestIds of recent turns are remembered so a client's retry learns their end.
    True when there was one (its `turn_ended` clears `running_turn` too)."""
    for ev in ends:
        request_id = ev.payload.get("requestId")
        if ev.kind == EventKind.TURN_ENDED.value and isinstance(request_id, str):
            from agentd.core import TurnOutcome

            try:
                outcome = TurnOutcome.from_event(ev.payload)
            except (KeyError, ValueError):
                continue
            prompt_id = ev.payload.get("promptId") or ""
            done = PromptDone(prompt_id, ev.payload.get("turnId"), outcome)
            actor.remember_outcome(request_id, done, _digest(ev.payload))
    if ends and ends[-1].kind == EventKind.TURN_STARTED.value:
        _close_interrupted_turn(actor, ends[-1].payload)
        return True
    return False


def _close_interrupted_turn(actor: RecoveryHost, started: dict[str, Any]) -> None:
    """The turn that was running when the server died ends `interrupted` (R-E6)."""
    from agentd.core import EndReason, OutcomeKind, TurnOutcome

    outcome = TurnOutcome(OutcomeKind.INTERRUPTED, reason=EndReason.SERVER_RESTARTED)
    actor.loop_state.cut_off()  # the next turn is told (task recovery)
    request_id = started.get("requestId")
    actor.journal.emit_turn_ended(
        started["turnId"],
        started.get("promptId"),
        outcome,
        request_id,
        usage=actor.usage,
        conversation=actor.conversation,
        request_digest=_digest(started),
    )
    if isinstance(request_id, str):
        done = PromptDone(started.get("promptId") or "", started["turnId"], outcome)
        actor.remember_outcome(request_id, done, _digest(started))


def _digest(payload: dict[str, Any]) -> str | None:
    """The content digest a turn's event logged with its requestId (older logs: none)."""
    value = payload.get("requestDigest")
    return value if isinstance(value, str) else None


def _recover_background_tasks(actor: RecoveryHost, marks: list[StoredEvent]) -> None:
    """Background tasks die with their process: one that was running ends `interrupted`
    (a durable `background_task` event, announced to the model at its next sampling round;
    it starts no turn). Every task of the earlier lives stays known to `task_output`, and
    new ids continue after theirs."""
    history = replay((e.kind, e.payload) for e in marks)
    for done in history.ended.values():
        actor.background.earlier.add(done, announce=False)
    for start in history.open:
        lost = start.interrupted()
        actor.journal.emit(lost)
        actor.background.earlier.add(lost, announce=True)
    actor.background.resume_ids(history.last_ids.get(TaskKind.BASH, 0))
    actor.loop_state.subagents.resume_ids(history.last_ids.get(TaskKind.AGENT, 0))
