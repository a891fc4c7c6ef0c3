"""The prompt queue's pure decisions: what a repeated requestId gets (R-S3), the bounded
request ledger, and reading a stored queue back."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentd.core import TurnOutcome
from agentd.protocol.acp import TextContent
from agentd.session.commands import Prompt, PromptDone
from agentd.session.queue.entry import QueuedPrompt, request_id_of, restore_entries
from agentd.session.queue.idempotency import (
    MAX_REMEMBERED_REQUESTS,
    Repeat,
    RequestLedger,
    decide_repeat,
)
from agentd.session.queue.ops import QueueKind


@pytest.mark.parametrize(
    ("known", "done", "enqueue", "expected"),
    [
        (False, False, False, Repeat.NEW),  # never seen: queue it
        (False, False, True, Repeat.NEW),
        (True, False, False, Repeat.JOIN),  # still waiting or running: wait with it
        (True, False, True, Repeat.ACK),  # an enqueue learns where the original waits
        (True, True, False, Repeat.ANSWER),  # ended in this run
        (True, True, True, Repeat.ACK),  # an enqueue learns how it ended
        (False, True, False, Repeat.ANSWER),  # ended before a restart (from the log)
        (False, True, True, Repeat.ACK),
    ],
)
def test_what_a_repeated_request_gets(known: bool, done: bool, enqueue: bool, expected: Repeat) -> None:
    assert decide_repeat(known=known, done=done, enqueue=enqueue) is expected


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        ({}, None),
        ({"requestId": ""}, None),  # empty is no key
        ({"requestId": 7}, None),  # only strings are keys
        ({"requestId": "r1"}, "r1"),
    ],
)
def test_request_id_of(meta: dict[str, Any], expected: str | None) -> None:
    assert request_id_of(meta) == expected


def _entry(loop: asyncio.AbstractEventLoop, entry_id: str) -> QueuedPrompt:
    return QueuedPrompt(entry_id, Prompt([TextContent(text=entry_id)], loop.create_future()))


async def test_the_ledger_answers_from_this_run_then_from_before_a_restart() -> None:
    loop = asyncio.get_running_loop()
    ledger = RequestLedger()
    assert ledger.lookup("r1") == (None, None)
    earlier = PromptDone("p0", "t0", TurnOutcome.cancelled("server_restarted"))
    ledger.remember_outcome("r1", earlier)
    assert ledger.lookup("r1") == (None, earlier)
    entry = _entry(loop, "p1")
    ledger.remember("r1", entry)  # this run's entry wins; it has not ended yet
    assert ledger.lookup("r1") == (entry, None)
    entry.result = PromptDone("p1", "t1", TurnOutcome.cancelled("user_cancelled"))
    assert ledger.lookup("r1") == (entry, entry.result)


async def test_the_ledger_forgets_the_oldest_request_first() -> None:
    loop = asyncio.get_running_loop()
    ledger = RequestLedger()
    for i in range(MAX_REMEMBERED_REQUESTS + 1):
        ledger.remember(f"r{i}", _entry(loop, f"p{i}"))
    assert ledger.lookup("r0") == (None, None)
    assert ledger.lookup("r1")[0] is not None
    assert ledger.lookup(f"r{MAX_REMEMBERED_REQUESTS}")[0] is not None


async def test_a_stored_queue_is_read_back_in_order_dropping_unreadable_rows() -> None:
    stored = [
        {"id": "p1", "blocks": [{"type": "text", "text": "one"}], "position": 5, "requestId": "r1"},
        {"id": "bad", "blocks": [{"type": "nonsense"}]},
        {
            "id": "p2",
            "blocks": [{"type": "text", "text": "two"}],
            "meta": {"requestId": "r2"},
            "owner": "alice",
            "lastEditor": "bob",
            "version": 3,
            "sendNow": True,
        },
    ]
    restored = restore_entries("s1", stored)
    assert [(r.entry.id, r.position, r.request_id) for r in restored] == [("p1", 5, "r1"), ("p2", 1, "r2")]
    second = restored[1].entry
    assert (second.owner, second.last_editor, second.version, second.send_now) == ("alice", "bob", 3, True)
    assert second.command.principal == "alice" and second.text == "two"
    assert second.kind is QueueKind.PROMPT and second.kind == "prompt"  # the wire string


async def test_a_stored_command_is_classified_again_when_read_back() -> None:
    stored = [
        {"id": "p1", "blocks": [{"type": "text", "text": "!echo hi"}]},
        {"id": "p2", "blocks": [{"type": "text", "text": "/usage"}]},
        {"id": "p3", "blocks": [{"type": "text", "text": "plain"}]},
    ]
    assert [r.entry.kind for r in restore_entries("s1", stored)] == [
        QueueKind.BANG,
        QueueKind.LOCAL,
        QueueKind.PROMPT,
    ]


# ---------------------------------------------------------------- content digests (issue 28 item 5)


def test_the_content_digest_tells_other_content_from_a_retry() -> None:
    from agentd.session.queue.idempotency import content_digest

    one = content_digest([TextContent(text="hello")])
    assert one == content_digest([TextContent(text="hello")])
    assert one != content_digest([TextContent(text="hello!")])
    assert one != content_digest([TextContent(text="hel"), TextContent(text="lo")])


async def test_the_ledger_keeps_each_request_ids_first_digest() -> None:
    from agentd.session.queue.idempotency import REQUEST_DIGEST

    ledger = RequestLedger()
    loop = asyncio.get_running_loop()
    cmd = Prompt(
        [TextContent(text="a")], loop.create_future(), meta={"requestId": "r1", REQUEST_DIGEST: "d1"}
    )
    ledger.remember("r1", QueuedPrompt("p1", cmd))
    cmd.blocks = [TextContent(text="edited in the queue")]  # an edit does not change what was submitted
    assert ledger.digest_of("r1") == "d1"
    ledger.remember_outcome("r2", PromptDone("p2", None, TurnOutcome.cancelled("user_cancelled")), "d2")
    ledger.remember_outcome(
        "r3", PromptDone("p3", None, TurnOutcome.cancelled("user_cancelled"))
    )  # an older log
    assert (ledger.digest_of("r2"), ledger.digest_of("r3"), ledger.digest_of("r4")) == ("d2", None, None)
