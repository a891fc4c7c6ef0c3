"""QueueSync (agentd/session/queue/sync.py): a queue change yields an event and a store
write of what changed only — no other prompt's text, a bounded number of rows — and the
queued-byte ledger follows every change."""

from __future__ import annotations

import json
import random
from collections import deque
from typing import Any

import pytest

from agentd.infra.config import Settings
from agentd.protocol.acp import TextContent
from agentd.session.actor.session_actor import QueuedPrompt
from agentd.session.command_syntax import Skill, expand_skill, parse_bang, parse_local
from agentd.session.commands import Prompt
from agentd.session.queue import ops as queue_ops
from agentd.session.queue.sync import LeftQueue, QueuedBytes, QueueSync
from agentd.store.queue_rows import QueueWrite

ORIGINAL: dict[str, str] = {}  # prompt id → its text when queued


def _diff(sync: Any, queue: Any) -> tuple[dict[str, Any] | None, Any]:
    """`sync.diff`, its `queue_update` as the payload clients get."""
    changed, write = sync.diff(list(queue))
    return (None if changed is None else changed.payload()), write


def entry(i: int, text: str | None = None, owner: str = "alice") -> QueuedPrompt:
    blocks = [TextContent(text=text if text is not None else f"text-{i}-" + "z" * 1000)]
    cmd = Prompt(blocks, reply=None, principal=owner, meta={"requestId": f"req-{i}"})  # type: ignore[arg-type]
    return QueuedPrompt(f"p{i}", cmd, owner=owner, last_editor=owner)


def texts_in(obj: Any, entries: list[QueuedPrompt]) -> set[str]:
    """The ids of the entries whose original text appears in `obj`."""
    raw = json.dumps(obj, default=lambda o: o.__dict__)
    return {e.id for e in entries if ORIGINAL[e.id] in raw}


def test_each_change_writes_and_publishes_only_what_changed() -> None:
    ledger = QueuedBytes()
    sync = QueueSync(ledger)
    entries = [entry(i) for i in range(50)]
    ORIGINAL.update({e.id: e.text for e in entries})
    q: deque[QueuedPrompt] = deque()
    for e in entries:
        q.append(e)
        event, write = _diff(sync, q)
        assert event is not None and write is not None
        assert texts_in(event, entries) == {e.id} and texts_in(write, entries) == {e.id}
        assert (len(write.upserts), write.deletes, write.updates) == (1, [], [])
    assert sync.bytes == sum(len(e.text.encode()) for e in entries) == ledger.of("alice")

    # The front starts: one delete, nothing else rewritten.
    started = q.popleft()
    event, write = _diff(sync, q)
    assert event == {"changes": [{"change": "removed", "id": started.id, "reason": "started"}], "length": 49}
    assert write == QueueWrite(deletes=[started.id])

    # An edit rewrites that one row; the event carries the new text only.
    assert queue_ops.edit(q, "p10", 1, "edited ten", "bob").applied
    event, write = _diff(sync, q)
    assert event is not None and write is not None
    assert [c["change"] for c in event["changes"]] == ["updated"]
    assert event["changes"][0]["entry"]["text"] == "edited ten" and texts_in(event, entries) == set()
    assert [r["id"] for r in write.upserts] == ["p10"] and not write.updates

    # A hold sends no text at all and touches no text column.
    assert queue_ops.hold(q, "p20", "bob").applied
    event, write = _diff(sync, q)
    assert event is not None and "text" not in event["changes"][0]["entry"]
    assert event["changes"][0]["entry"]["held"] is True
    assert write is not None and not write.upserts and [u[0] for u in write.updates] == ["p20"]

    # Moving one prompt to the front: a "moved" with ids, positions only.
    assert queue_ops.move(q, ["p30"]).applied
    event, write = _diff(sync, q)
    assert event is not None and write is not None
    assert [c["change"] for c in event["changes"]] == ["moved"]
    assert event["changes"][0]["order"] == [e.id for e in q] and texts_in(event, entries) == set()
    assert not write.upserts and all(set(values) == {"position"} for _, values in write.updates)

    # Removing one: a delete and the reason it left.
    result = queue_ops.remove(q, "p40", 1)
    sync.leaving["p40"] = LeftQueue.REMOVED
    event, write = _diff(sync, q)
    assert result.applied and write == QueueWrite(deletes=["p40"])
    assert event == {
        "changes": [{"change": "removed", "id": "p40", "reason": "removed_from_queue"}],
        "length": 48,
    }
    assert sync.bytes == sum(len(e.text.encode()) for e in q) == ledger.of("alice")

    # Nothing changed: nothing to publish or store.
    assert sync.diff(list(q)) == (None, None)
    sync.forget()
    assert ledger.of("alice") == 0


def test_positions_stay_ordered_across_inserts_at_the_front_and_middle() -> None:
    sync = QueueSync(QueuedBytes())
    q: deque[QueuedPrompt] = deque(entry(i, f"t{i}") for i in range(5))
    positions: dict[str, int] = {}

    def apply(write: QueueWrite | None) -> None:
        for r in write.upserts if write else []:
            positions[r["id"]] = r["position"]
        for pid in write.deletes if write else []:
            positions.pop(pid)
        for pid, values in write.updates if write else []:
            positions[pid] = values.get("position", positions[pid])

    apply(sync.diff(list(q))[1])
    q.appendleft(entry(10, "front"))
    apply(sync.diff(list(q))[1])
    queue_ops.insert_send_now(q, entry(11, "now"))
    q.insert(3, entry(12, "middle"))
    apply(sync.diff(list(q))[1])
    assert sorted(positions, key=positions.__getitem__) == [e.id for e in q]


def test_queued_bytes_limits_per_session_and_principal() -> None:
    ledger = QueuedBytes()
    settings = Settings(max_queued_bytes_per_session=100, max_queued_bytes_per_principal=150)
    one, two = QueueSync(ledger), QueueSync(ledger)
    one.diff([entry(1, "a" * 90)])
    assert one.check_room(settings, "alice", 10) is None
    refused = one.check_room(settings, "alice", 11)
    assert refused is not None and refused.data == {"limit": "queued_bytes_session", "max": 100, "size": 11}
    two.diff([entry(2, "b" * 50)])
    refused = two.check_room(settings, "alice", 11)
    assert refused is not None and refused.data["limit"] == "queued_bytes_principal"
    assert two.check_room(settings, "bob", 11) is None  # another principal's budget
    unlimited = Settings(max_queued_bytes_per_session=0, max_queued_bytes_per_principal=0)
    assert one.check_room(unlimited, "alice", 10**9) is None


def _kinded(i: int, text: str, kind: queue_ops.QueueKind) -> QueuedPrompt:
    e = entry(i, text)
    e.kind = kind
    return e


def test_combine_merges_only_consecutive_plain_prompts() -> None:
    K = queue_ops.QueueKind
    q = deque(
        [
            _kinded(1, "a", K.PROMPT),
            _kinded(2, "b", K.PROMPT),
            _kinded(3, "!echo hi", K.BANG),
            _kinded(4, "c", K.PROMPT),
        ]
    )
    result = queue_ops.combine(q, "bob")
    assert result.applied and [e.id for e in result.removed] == ["p2"]
    assert [(e.id, e.text) for e in q] == [("p1", "a\n\nb"), ("p3", "!echo hi"), ("p4", "c")]


@pytest.mark.parametrize("kind", ["bang", "local", "skill", "compact"])
def test_combine_never_merges_a_command(kind: str) -> None:
    K = queue_ops.QueueKind
    # A command at the front is not merged into, and one behind it is not merged in.
    for q in (
        deque([_kinded(1, "x", K(kind)), _kinded(2, "a", K.PROMPT)]),
        deque([_kinded(1, "a", K.PROMPT), _kinded(2, "x", K(kind))]),
    ):
        before = [(e.id, e.text) for e in q]
        result = queue_ops.combine(q, "bob")
        assert (result.applied, result.reason) == (False, queue_ops.OpRefusal.NOTHING_TO_COMBINE)
        assert [(e.id, e.text) for e in q] == before


def test_a_queued_command_is_editable_but_a_compaction_job_is_not() -> None:
    K = queue_ops.QueueKind
    q = deque([_kinded(1, "!echo hi", K.BANG), _kinded(2, "", K.COMPACT)])
    assert queue_ops.edit(q, "p1", 1, "plain now", "bob").applied
    refused = queue_ops.edit(q, "p2", 1, "x", "bob")
    assert (refused.applied, refused.reason) == (False, queue_ops.OpRefusal.NOT_EDITABLE)


def test_a_prompts_kind_is_what_the_parsers_say_for_any_text() -> None:
    # `prompt_kind` skips the parsers for text that cannot start a command: the same
    # answers as asking each of them, on texts with any whitespace in front.
    skills = {"review": Skill("review", "Review code", "Review this: $ARGUMENTS")}
    K = queue_ops.QueueKind
    rng = random.Random(32)
    pieces = [" ", "\t", "\n", "\u00a0", "\u2003", "/", "!", "a", "help", "review", "compact", "mode plan"]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 5)))
        if parse_local(text) is not None:
            expected = K.LOCAL
        elif parse_bang(text) is not None:
            expected = K.BANG
        elif expand_skill(text, skills) is not None:
            expected = K.SKILL
        else:
            expected = K.PROMPT
        assert queue_ops.prompt_kind(text, skills) is expected, repr(text)
