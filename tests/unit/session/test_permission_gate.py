"""The permission gate's ending (issue 29, item 1), without a server: a question every asked
client failed to answer — an error reply, or the client left — ends `unanswered` at once;
while one asked client may still answer it waits; a question nobody could be asked waits
for an answer or its timeout, as before."""

from __future__ import annotations

import asyncio
from typing import Any

from agentd.core.permission import PermissionOutcome
from agentd.session.permission_gate import PermissionGate
from tests.support.polling import until

OPTIONS = [{"optionId": "allow", "kind": "allow_once", "name": "Allow"}]


class FakeJournal:
    def emit(self, update: Any, *, origin: str | None = None) -> None:
        pass

    async def flushed(self) -> None:
        pass

    def persist_fields(self, fields: dict[str, Any]) -> None:
        pass

    def mark(self) -> int:
        return 0


class FakeRender:
    def permission_request(self, sid: str, rid: str, call: dict[str, Any], options: Any) -> tuple[str, dict]:
        return "session/request_permission", {"sessionId": sid, "requestId": rid}


class Client:
    """A connection that answers the question as told: an error, an option, or never."""

    def __init__(self, sink_id: str, answer: str | Exception | None) -> None:
        self.id = sink_id
        self.answer = answer
        self.asked = asyncio.Event()

    def send_notification(self, method: str, params: dict[str, Any]) -> bool:
        return True

    async def send_replay(self, method: str, params: dict[str, Any]) -> bool:
        return True

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.asked.set()
        if isinstance(self.answer, Exception):
            raise self.answer
        if self.answer is None:
            await asyncio.Event().wait()  # never answers
        return {"outcome": {"outcome": "selected", "optionId": self.answer}}


class Viewer:
    """A client that cannot be asked (an SSE viewer: no `request`)."""

    id = "viewer"

    def send_notification(self, method: str, params: dict[str, Any]) -> bool:
        return True

    async def send_replay(self, method: str, params: dict[str, Any]) -> bool:
        return True


def gate(sinks: list[Any], timeout_s: float = 3600) -> PermissionGate:
    return PermissionGate(
        "s1", FakeJournal(), lambda: sinks, lambda: timeout_s,  # type: ignore[arg-type]
        mode=lambda: "default", plan=lambda: False, render=FakeRender(),  # type: ignore[arg-type]
    )  # fmt: skip


async def test_every_client_answering_with_an_error_refuses_at_once() -> None:
    sinks = [Client("a", RuntimeError("-32601 method not found")), Client("b", RuntimeError("boom"))]
    answer = await asyncio.wait_for(gate(sinks).ask({"toolCallId": "t"}, OPTIONS), 10)
    assert answer.outcome is PermissionOutcome.UNANSWERED
    assert not answer.allowed


async def test_one_client_still_able_to_answer_keeps_the_question_open() -> None:
    slow = Client("slow", None)
    g = gate([Client("err", RuntimeError("-32601")), slow])
    asking = asyncio.create_task(g.ask({"toolCallId": "t"}, OPTIONS))
    await slow.asked.wait()
    await until(lambda: any(p.errors for p in g.pending.values()), what="the error reply handled")
    (pending,) = g.pending.values()
    assert not asking.done()
    assert g.answer(pending.id, "allow") is True  # the other client (or anyone) may still answer
    assert (await asking).allowed


async def test_the_last_client_able_to_answer_leaving_refuses() -> None:
    quiet = Client("quiet", None)
    g = gate([quiet])
    asking = asyncio.create_task(g.ask({"toolCallId": "t"}, OPTIONS))
    await quiet.asked.wait()
    g.forget_sink("quiet")  # it detached without answering
    answer = await asyncio.wait_for(asking, 10)
    assert answer.outcome is PermissionOutcome.UNANSWERED


async def test_a_question_nobody_could_be_asked_waits_for_its_timeout() -> None:
    answer = await asyncio.wait_for(gate([Viewer()], timeout_s=0.05).ask({"toolCallId": "t"}, OPTIONS), 10)
    assert answer.outcome is PermissionOutcome.TIMEOUT
