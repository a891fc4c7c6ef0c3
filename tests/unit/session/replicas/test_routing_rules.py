"""The pure pieces of routing across replicas (R-C1, issue 15 item 2): the routing
notifications' payloads and channels, which calls are forwarded, and how a watch on a
non-owner follows the permission questions open in the log."""

from __future__ import annotations

import asyncio
import re
from typing import Any, cast

import pytest

from agentd.core.events import Event, EventKind
from agentd.protocol.methods import QueueOp, Served
from agentd.session.errors import SessionError, SessionErrorKind
from agentd.session.replicas.leases import owned_elsewhere
from agentd.session.replicas.remote import RemoteWatch
from agentd.session.replicas.routing import OwnerGone, Router
from agentd.store import routed as routed_rows
from agentd.store.db import Store
from agentd.store.routed import (
    MAX_NOTIFY_PAYLOAD,
    RoutedCommand,
    State,
    Wake,
    carried_outcome,
    parse_payload,
    payload,
    replica_channel,
    reply_payload,
)
from agentd.transport.render import ACP_RENDERER
from agentd.transport.routed import ROUTED, TURN_LONG, carryable, connection_bound, routable, session_id_of
from tests.support.polling import until


def test_payloads_round_trip_and_anything_else_is_ignored() -> None:
    assert parse_payload(payload(Wake.COMMAND, 42)) == (Wake.COMMAND, 42)
    assert parse_payload(payload(Wake.REPLY, 7)) == (Wake.REPLY, 7)
    for bad in ["", "cmd", "cmd ", "cmd x", "cmd -1", "cmd 1.5", "run 3", "reply " + "9" * 19, "3 sess"]:
        assert parse_payload(bad) is None, bad


def test_each_replica_has_its_own_channel_an_identifier_whatever_its_id() -> None:
    ids = ["replica-a", "replica-b", "host.example-123-abc", 'we"ird id; DROP', "é" * 100]
    channels = [replica_channel(i) for i in ids]
    assert len(set(channels)) == len(ids)
    assert all(re.fullmatch(r"[a-z0-9_]{1,63}", c) for c in channels), channels
    assert replica_channel("replica-a") == channels[0]  # stable across processes


def test_only_the_commands_of_a_session_owned_elsewhere_are_forwarded() -> None:
    elsewhere = owned_elsewhere("sess_1", "replica-a", 3.0)
    commands = [Served.SESSION_PROMPT, Served.SESSION_CANCEL, Served.INTERJECT, Served.ENQUEUE]
    commands += [Served.SEND_NOW, Served.PERMISSION_RESPOND, QueueOp.EDIT.method, QueueOp.LIST.method]
    commands += [Served.SESSION_CLOSE, Served.SESSION_DELETE, Served.FORK, Served.SHARE, Served.RENAME]
    commands += [Served.COMPACT, Served.REWIND]
    for method in commands:
        assert method in ROUTED
        assert routable(method, elsewhere, routed=False) == "replica-a"
    # Already forwarded once: never again (no loops between replicas).
    assert routable(Served.SESSION_PROMPT, elsewhere, routed=True) is None
    # Served here from the log, or bound to the connection on the replica running the session.
    for method in (Served.ATTACH, Served.SESSION_LOAD, Served.SESSION_RESUME, Served.HOOKS_REGISTER):
        assert routable(method, elsewhere, routed=False) is None
    # Another session error is not a routing matter.
    stopping = SessionError(SessionErrorKind.SESSION_STOPPING, "stopping", {"owner": "replica-a"})
    assert routable(Served.SESSION_PROMPT, stopping, routed=False) is None
    nameless = SessionError(SessionErrorKind.OWNED_ELSEWHERE, "elsewhere", {})
    assert routable(Served.SESSION_PROMPT, nameless, routed=False) is None
    busy = owned_elsewhere("sess_1", "a replica with a write in flight", 1.0)  # not a replica id
    assert routable(Served.SESSION_PROMPT, busy, routed=False) is None
    assert session_id_of({"sessionId": "s"}) == "s"
    assert session_id_of({"sessionId": 3}) is None and session_id_of([1]) is None


async def _no_answer(*_: Any) -> None:
    return None


def _event(kind: EventKind, seq: int, **payload: Any) -> Event:
    return Event.stored("sess_1", kind, payload, seq=seq)


async def test_a_watch_follows_the_open_permission_questions_of_the_log() -> None:
    watch = RemoteWatch(
        cast(Store, None), "sess_1", ACP_RENDERER, _no_answer, cursor=0, replica_id="replica-b"
    )
    call = {"toolCallId": "t1", "title": "bash"}
    options = [{"optionId": "allow_once", "name": "Allow", "kind": "allow_once"}]
    watch.track(_event(EventKind.PERMISSION_REQUESTED, 1, requestId="perm_1", toolCall=call, options=options))
    watch.track(_event(EventKind.PERMISSION_REQUESTED, 2, requestId="perm_2", toolCall=call, options=options))
    watch.track(_event(EventKind.PERMISSION_RESOLVED, 3, requestId="perm_1", outcome="selected"))
    watch.track(_event(EventKind.AGENT_MESSAGE, 4, messageId="m", text="hi"))
    watch.track(_event(EventKind.PERMISSION_REQUESTED, 5, requestId=None))  # malformed: ignored
    assert watch.pending == {"perm_2": {"toolCall": call, "options": options}}


def test_a_prompt_routed_from_a_connection_here_is_that_connections_own() -> None:
    watch = RemoteWatch(
        cast(Store, None), "sess_1", ACP_RENDERER, _no_answer, cursor=0, replica_id="replica-b"
    )
    content = [{"type": "text", "text": "go"}]
    ours = _event(EventKind.USER_MESSAGE, 1, messageId="u", content=content, routedFrom="replica-b/conn_1")
    theirs = _event(EventKind.USER_MESSAGE, 2, messageId="u", content=content, routedFrom="replica-c/conn_1")
    plain = _event(EventKind.USER_MESSAGE, 3, messageId="u", content=content)
    assert watch._with_origin(ours).origin == "conn_1"  # not sent back to conn_1 (hub.Subscriber)
    assert watch._with_origin(theirs).origin is None
    assert watch._with_origin(plain).origin is None


def test_every_session_scoped_method_is_forwarded_served_from_the_log_or_refused_clearly() -> None:
    """A client behind a load balancer cannot pick the replica: no session-scoped method may
    answer a bare `owned_elsewhere` (issue: routing gaps)."""
    from_log = {Served.ATTACH, Served.SESSION_LOAD, Served.SESSION_RESUME}
    local = {Served.DETACH}  # this connection's own subscription, wherever the session runs
    session_scoped = {m for m in Served if m.startswith(("session/", "_agentd/"))}
    session_scoped -= {Served.SESSION_NEW, Served.SESSION_LIST, Served.IMPORT}  # they make sessions
    session_scoped -= {Served.SESSION_NEW, Served.SESSION_LIST, Served.MODELS_LIST}  # name no session
    unhandled = session_scoped - ROUTED - from_log - local - {Served.HOOKS_REGISTER}
    assert not unhandled, unhandled


def test_a_stop_hook_on_a_non_owner_is_refused_saying_why_and_not_to_retry() -> None:
    elsewhere = owned_elsewhere("sess_1", "replica-a", 3.0)
    refusal = connection_bound(Served.HOOKS_REGISTER, elsewhere)
    assert refusal is not None and refusal.kind is SessionErrorKind.OWNED_ELSEWHERE
    assert refusal.data is not None
    assert refusal.data["reason"] == "connection_bound" and refusal.data["retryable"] is False
    assert refusal.data["owner"] == "replica-a"
    assert "replica-a" in refusal.message and "call back" in refusal.message
    assert connection_bound(Served.SESSION_PROMPT, elsewhere) is None
    stopping = SessionError(SessionErrorKind.SESSION_STOPPING, "stopping", {"owner": "replica-a"})
    assert connection_bound(Served.HOOKS_REGISTER, stopping) is None


def test_only_what_waits_for_a_turn_is_forwarded_without_a_deadline() -> None:
    assert TURN_LONG == {Served.SESSION_PROMPT, Served.COMPACT}  # compaction runs a model call
    assert TURN_LONG <= ROUTED


def test_a_reply_carries_its_outcome_when_it_fits_and_only_then() -> None:
    small = '{"result":{"stopReason":"end_turn"}}'
    raw = reply_payload(7, small)
    assert parse_payload(raw) == (Wake.REPLY, 7)
    assert carried_outcome(raw) == {"result": {"stopReason": "end_turn"}}
    big = '{"result":{"text":"' + "x" * MAX_NOTIFY_PAYLOAD + '"}}'
    assert reply_payload(7, big) == payload(Wake.REPLY, 7)  # read from its row instead
    assert carried_outcome(payload(Wake.REPLY, 7)) is None
    for bad in [
        "reply 7 {",
        "reply 7 [1]",
        'reply 7 {"other":1}',
        'cmd 7 {"result":{}}',
        'reply 7 {"error":3}',
    ]:
        assert carried_outcome(bad) is None, bad


def test_only_a_command_that_never_ran_or_a_prompt_with_a_requestid_is_carried_on() -> None:
    never_ran = OwnerGone("s", "replica-a", None, ran=False)
    may_have_run = OwnerGone("s", "replica-a", "replica-c", ran=None)
    with_id = {"sessionId": "s", "_meta": {"agentd": {"requestId": "r-1"}}}
    for method in (Served.SESSION_PROMPT, Served.RENAME, Served.SESSION_CANCEL, QueueOp.REMOVE.method):
        assert carryable(method, {"sessionId": "s"}, never_ran)  # it never ran: safe anywhere
    for method in (Served.SESSION_PROMPT, Served.ENQUEUE, Served.SEND_NOW):
        assert carryable(method, with_id, may_have_run)  # joins its first run
        assert not carryable(method, {"sessionId": "s"}, may_have_run)  # might run twice
    assert not carryable(Served.RENAME, with_id, may_have_run)
    assert not carryable(Served.SESSION_PROMPT, {"_meta": {"agentd": {"requestId": 3}}}, may_have_run)
    assert may_have_run.data == {"reason": "owner_lost", "retryable": True}
    assert "may or may not have taken effect" in may_have_run.message
    assert "may or may not" not in never_ran.message


async def test_a_reply_that_beats_its_submit_is_not_waited_for_a_check_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The owner ran a quick command and its reply came in before this busy replica heard
    its submit's answer: the forward returns the carried outcome without reading the row."""
    router = Router(None, "replica-b", timeout_s=30, check_interval_s=0)
    read: list[int] = []

    async def submit(_engine: Any, **_kw: Any) -> int:
        router.on_notification(reply_payload(7, '{"result": {"from": "the reply"}}'))
        return 7

    async def take_outcome(_engine: Any, command_id: int) -> tuple[State, dict[str, Any]]:
        read.append(command_id)
        return State.DONE, {"result": {"from": "the row"}}

    async def nothing(*_a: Any) -> Any:
        return "replica-a" if _a[1:] == ("s1",) else None

    monkeypatch.setattr(routed_rows, "submit", submit)
    monkeypatch.setattr(routed_rows, "take_outcome", take_outcome)
    monkeypatch.setattr(routed_rows, "lease_holder", nothing)
    monkeypatch.setattr(routed_rows, "forget_many", nothing)
    outcome = await router.forward(
        session_id="s1", owner="replica-a", method="_agentd/usage/get", params={}, principal="p", teams=()
    )
    assert outcome == {"result": {"from": "the reply"}} and read == []
    await router.stop()


async def test_an_outcome_that_fits_wakes_its_caller_beside_its_durable_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The owner's reply carrying the outcome does not wait for the outcome's row (its
    flush); the row is still written, without a second wake-up. An outcome too long for a
    notification wakes its caller only once stored (the caller reads it from the row)."""
    router = Router(None, "replica-a", timeout_s=30, check_interval_s=30)
    stored = asyncio.Event()
    finished: list[tuple[int, bool]] = []
    replies: list[tuple[int, bool]] = []  # (command, sent while its row was still being written)

    async def claim_many(_engine: Any, command_ids: list[int], *_a: Any) -> list[RoutedCommand]:
        return [RoutedCommand(i, "s1", "replica-b", "m", "p", (), {"n": i}) for i in command_ids]

    async def finish(_engine: Any, command: RoutedCommand, text: str, *, wake: bool = True) -> None:
        finished.append((command.id, wake))
        await stored.wait()

    async def finish_many_quiet(_engine: Any, outcomes: list[tuple[int, str]]) -> list[None]:
        finished.extend((command_id, False) for command_id, _ in outcomes)
        await stored.wait()
        return [None for _ in outcomes]

    async def send_replies(_engine: Any, sent: list[tuple[RoutedCommand, str]]) -> list[None]:
        replies.extend((command.id, not stored.is_set()) for command, _ in sent)
        return [None for _ in sent]

    async def execute(command: RoutedCommand) -> dict[str, Any]:
        size = 10 if command.id == 1 else MAX_NOTIFY_PAYLOAD
        return {"result": {"text": "x" * size}}

    monkeypatch.setattr(routed_rows, "claim_many", claim_many)
    monkeypatch.setattr(routed_rows, "finish", finish)
    monkeypatch.setattr(routed_rows, "finish_many_quiet", finish_many_quiet)
    monkeypatch.setattr(routed_rows, "send_replies", send_replies)
    router.execute = execute
    serving = asyncio.create_task(router.serve(1))
    await until(lambda: replies == [(1, True)], what="the caller woken before the row is written")
    assert finished == [(1, False)]  # the row written all the same, waking nobody
    stored.set()
    await serving
    await router.serve(2)  # too long to carry: the caller is woken by the row's write
    assert finished == [(1, False), (2, True)] and replies == [(1, True)]
    await router.stop()


async def test_commands_woken_together_are_claimed_stored_and_answered_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An owner woken for many commands (200 prompts routed at once) claims those that came
    while a claim was in flight in one statement, and stores and answers them so too; each
    command still runs once, with its own outcome."""
    router = Router(None, "replica-a", timeout_s=30, check_interval_s=30)
    first_claim, written = asyncio.Event(), asyncio.Event()
    claims: list[list[int]] = []
    outcomes: list[list[tuple[int, str]]] = []
    replies: list[list[int]] = []

    async def claim_many(_engine: Any, command_ids: list[int], *_a: Any) -> list[RoutedCommand | None]:
        claims.append(list(command_ids))
        await first_claim.wait()
        # 13 was withdrawn meanwhile: not taken, never run.
        return [
            None if i == 13 else RoutedCommand(i, "s1", "replica-b", "m", "p", (), {"n": i})
            for i in command_ids
        ]

    async def finish_many_quiet(_engine: Any, items: list[tuple[int, str]]) -> list[None]:
        outcomes.append(list(items))
        await written.wait()
        return [None for _ in items]

    async def send_replies(_engine: Any, sent: list[tuple[RoutedCommand, str]]) -> list[None]:
        replies.append([command.id for command, _ in sent])
        await written.wait()
        return [None for _ in sent]

    ran: list[int] = []

    async def execute(command: RoutedCommand) -> dict[str, Any]:
        ran.append(command.id)
        return {"result": {"n": command.params["n"]}}

    monkeypatch.setattr(routed_rows, "claim_many", claim_many)
    monkeypatch.setattr(routed_rows, "finish_many_quiet", finish_many_quiet)
    monkeypatch.setattr(routed_rows, "send_replies", send_replies)
    router.execute = execute
    first = asyncio.create_task(router.serve(1))
    await until(lambda: claims == [[1]], what="the first claim in flight")
    rest = [asyncio.create_task(router.serve(i)) for i in range(10, 15)]
    await until(lambda: router._claims.waiting == 5, what="the others waiting for it")
    first_claim.set()
    # One outcome and one reply in flight, the other four of each waiting for it.
    await until(lambda: (router._outcomes.waiting, router._replies.waiting) == (4, 4), what="queued")
    written.set()
    await asyncio.gather(first, *rest)
    assert claims == [[1], [10, 11, 12, 13, 14]]
    assert sorted(ran) == [1, 10, 11, 12, 14]
    stored = {i: text for batch in outcomes for i, text in batch}
    assert stored == {i: f'{{"result":{{"n":{i}}}}}' for i in ran}
    assert sorted(i for batch in replies for i in batch) == sorted(ran)
    assert len(outcomes) == len(replies) == 2  # the first one, then the other four together
    await router.stop()


async def test_forwards_made_together_are_submitted_together_each_answered_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A caller routing many prompts at once (200 clients) submits those made while a submit
    was in flight in one statement; each forward still waits for, and gets, its own outcome."""
    router = Router(None, "replica-b", timeout_s=30, check_interval_s=30)
    first_sent = asyncio.Event()
    submits: list[list[str]] = []

    async def submit_many(_engine: Any, forwards: list[routed_rows.Forward]) -> list[int]:
        submits.append([f.session_id for f in forwards])
        await first_sent.wait()
        return [int(f.session_id[1:]) for f in forwards]

    monkeypatch.setattr(routed_rows, "submit_many", submit_many)

    async def forward(n: int) -> dict[str, Any]:
        return await router.forward(
            session_id=f"s{n}", owner="replica-a", method="m", params={}, principal="p", teams=()
        )

    first = asyncio.create_task(forward(1))
    await until(lambda: submits == [["s1"]], what="the first submit in flight")
    rest = [asyncio.create_task(forward(n)) for n in range(10, 14)]
    await until(lambda: router._submits.waiting == 4, what="the others waiting for it")
    first_sent.set()
    await until(lambda: len(router._waiting) == 5, what="every forward waiting for its outcome")
    for n in (13, 1, 11, 10, 12):
        router.on_notification(reply_payload(n, f'{{"result": {{"n": {n}}}}}'))
    assert [await task for task in (first, *rest)] == [{"result": {"n": n}} for n in (1, 10, 11, 12, 13)]
    assert submits == [["s1"], ["s10", "s11", "s12", "s13"]]
    await router.stop()


async def test_an_outcome_carries_how_long_its_owner_holds_the_session_to_the_caller_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The owner adds its lease's time left to the outcome; the caller takes the owner as the
    holder until then (from before it sent the command) and returns the outcome without it."""
    from agentd.session.replicas.routing import LEASE_LEFT

    sent: dict[int, str] = {}
    owner = Router(None, "replica-a", timeout_s=30, check_interval_s=30, lease_left={"s1": 4.56789}.get)

    async def claim_many(_engine: Any, command_ids: list[int], *_a: Any) -> list[RoutedCommand]:
        return [RoutedCommand(i, f"s{i}", "replica-b", "m", "p", (), {}) for i in command_ids]

    async def send_replies(_engine: Any, replies: list[tuple[RoutedCommand, str]]) -> list[None]:
        sent.update((command.id, text) for command, text in replies)
        return [None for _ in replies]

    async def stored(_engine: Any, items: list[tuple[int, str]]) -> list[None]:
        return [None for _ in items]

    async def execute(command: RoutedCommand) -> dict[str, Any]:
        return {"result": {"n": command.id}}

    monkeypatch.setattr(routed_rows, "claim_many", claim_many)
    monkeypatch.setattr(routed_rows, "send_replies", send_replies)
    monkeypatch.setattr(routed_rows, "finish_many_quiet", stored)
    owner.execute = execute
    await owner.serve(1)
    await owner.serve(2)  # a session the owner does not hold: nothing said
    await until(lambda: len(sent) == 2, what="both replies sent")
    assert [carried_outcome(reply_payload(i, sent[i])) for i in (1, 2)] == [
        {"result": {"n": 1}, LEASE_LEFT: 4.567},
        {"result": {"n": 2}},
    ]
    await owner.stop()

    held: list[tuple[str, str, float]] = []
    caller = Router(None, "replica-b", timeout_s=30, check_interval_s=30, on_held=lambda *a: held.append(a))
    loop = asyncio.get_running_loop()

    async def submit_many(_engine: Any, forwards: list[routed_rows.Forward]) -> list[int]:
        return [int(f.session_id[1:]) for f in forwards]

    monkeypatch.setattr(routed_rows, "submit_many", submit_many)
    monkeypatch.setattr(routed_rows, "forget_many", stored)
    before = loop.time()
    forwards = [
        asyncio.create_task(caller.forward(session_id=f"s{i}", owner="replica-a", method="m", params={},
                                           principal="p", teams=()))
        for i in (1, 2)
    ]  # fmt: skip
    await until(lambda: len(caller._waiting) == 2, what="both forwards waiting")
    for i, text in sent.items():
        caller.on_notification(reply_payload(i, text))
    assert await asyncio.gather(*forwards) == [{"result": {"n": 1}}, {"result": {"n": 2}}]
    assert [(sid, who) for sid, who, _ in held] == [("s1", "replica-a")]
    assert before + 4.567 <= held[0][2] <= loop.time() + 4.567
    await caller.stop()
