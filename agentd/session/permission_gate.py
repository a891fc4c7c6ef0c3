"""The permission gate of one session: the answers remembered per tool, pending requests,
asking every client that can answer, first answer wins, timeout and cancellation. Owned by
the `SessionActor`; the running turn uses it as its `PermissionGate` (agentd/loop/context.py)
and the transport's answers reach it through `answer_permission`."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agentd.core import (
    PermissionAnswer,
    PermissionMode,
    PermissionOptionKind,
    PermissionOutcome,
    PermissionRequested,
    PermissionResolved,
)
from agentd.protocol import RequestPermissionResult
from agentd.session.commit_outcome import CommitFailure, not_committed
from agentd.session.eventlog import Journal
from agentd.session.sinks import FrameSink, Renderer, requesting
from agentd.tools import Remembered

log = logging.getLogger(__name__)

# The bound on waiting for an answer's event to be committed (the writer gives up sooner).
ANSWER_SAVE_TIMEOUT_S = 60.0


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


@dataclass
class PendingPermission:
    id: str
    tool_call: dict[str, Any]
    options: list[dict[str, str]]
    future: asyncio.Future[PermissionAnswer]
    asked: dict[str, asyncio.Task[None]] = field(default_factory=dict)  # sink id → request task
    errors: list[str] = field(default_factory=list)  # what the clients that could not answer said
    # Once the answer's `permission_resolved` is submitted: the writer's ticket before it.
    recorded: asyncio.Future[int] | None = None


class PermissionGate:
    def __init__(
        self,
        session_id: str,
        journal: Journal,
        sinks: Callable[[], Iterable[FrameSink]],
        timeout_s: Callable[[], float],
        *,
        mode: Callable[[], PermissionMode],
        plan: Callable[[], bool],
        render: Renderer,
        memory: dict[str, str] | None = None,
    ) -> None:
        self._session_id = session_id
        self._journal = journal
        self._emit = journal.emit
        self._flushed = journal.flushed
        self._sinks = sinks
        self._timeout_s = timeout_s
        self._mode = mode
        self._plan = plan
        self._render = render  # the question's wire shape (agentd/transport/render.py)
        self._memory = memory or {}  # tool name → a remembered answer (persisted with the session)
        self.pending: dict[str, PendingPermission] = {}

    # ------------------------------------------------------------------ the loop's PermissionGate

    def mode(self) -> PermissionMode:
        return self._mode()

    def plan(self) -> bool:
        return self._plan()

    def remembered(self, tool_name: str) -> Remembered | None:
        value = self._memory.get(tool_name)
        return Remembered(value) if value else None

    def remember(self, tool_name: str, answer: Remembered) -> None:
        self._memory[tool_name] = answer.value
        self._journal.persist_fields({"permission_memory": dict(self._memory)})

    async def ask(self, tool_call: dict[str, Any], options: list[dict[str, str]]) -> PermissionAnswer:
        loop = asyncio.get_running_loop()
        pending = PendingPermission(
            new_id("perm"), tool_call, options, loop.create_future(), recorded=loop.create_future()
        )
        self.pending[pending.id] = pending
        self._emit(PermissionRequested(pending.id, tool_call, options))
        # Clients see the tool_call (and this request's event) before the question itself.
        await self._flushed()
        for sink in self._sinks():
            self.ask_sink(sink, pending)
        answer = PermissionAnswer(PermissionOutcome.CANCELLED)
        try:
            async with asyncio.timeout(self._timeout_s()):
                answer = await pending.future
        except TimeoutError:
            answer = PermissionAnswer(PermissionOutcome.TIMEOUT)
        finally:
            self.pending.pop(pending.id, None)
            for task in pending.asked.values():
                task.cancel()
            resolved = PermissionResolved(pending.id, answer.outcome, answer.option_kind or None)
            since = self._journal.mark()
            self._emit(resolved)
            if pending.recorded is not None and not pending.recorded.done():
                pending.recorded.set_result(since)
        return answer

    def ask_sink(self, sink: FrameSink, pending: PendingPermission) -> None:
        client = requesting(sink)
        if client is None or sink.id in pending.asked:
            return  # this client cannot answer (e.g. an SSE viewer)
        method, params = self._render.permission_request(
            self._session_id, pending.id, pending.tool_call, pending.options
        )

        async def ask_one() -> None:
            try:
                result = await client.request(method, params)
                parsed = RequestPermissionResult.model_validate(result)
            except Exception as exc:  # the client went away or answered nonsense: others may answer
                log.info("permission request to %s got no usable answer: %s", sink.id, exc)
                pending.errors.append(f"{sink.id}: {exc}")
                self._unanswerable(pending, running=asyncio.current_task())
                return
            outcome = parsed.outcome
            if outcome.outcome == "cancelled":  # the ACP model's literal
                self.cancel(pending.id)
                return
            if self.answer(pending.id, outcome.option_id) is None:
                log.info("client %s chose unknown option %r", sink.id, outcome.option_id)

        pending.asked[sink.id] = asyncio.create_task(ask_one())

    def answer(self, request_id: str, option_id: str) -> bool | None:
        """First answer wins: True if this one did, False if the request is unknown or
        already answered, None for an option the request does not offer."""
        pending = self.pending.get(request_id)
        if pending is None or pending.future.done():
            return False
        kinds = {o["optionId"]: o["kind"] for o in pending.options}
        kind = kinds.get(option_id)
        if kind is None:
            return None
        pending.future.set_result(PermissionAnswer(PermissionOutcome.SELECTED, PermissionOptionKind(kind)))
        return True

    def resolution(self, request_id: str) -> asyncio.Future[int] | None:
        """Taken before answering: resolves once the answer is submitted to the log (see
        `saved`)."""
        pending = self.pending.get(request_id)
        return None if pending is None else pending.recorded

    async def saved(self, resolution: asyncio.Future[int] | None) -> None:
        """Return once the answer that won is committed (its `permission_resolved`
        event): an answer is acknowledged only then; a dropped one raises a retryable
        `not_committed` error (issue 26)."""
        if resolution is None:
            return
        try:
            async with asyncio.timeout(ANSWER_SAVE_TIMEOUT_S):
                since = await asyncio.shield(resolution)
        except TimeoutError:  # the turn never got to record it: nothing is saved
            raise not_committed(self._session_id, CommitFailure.CONNECTION_LOST) from None
        await self._journal.committed(since)  # bounded by the writer's own deadline

    def cancel(self, request_id: str) -> bool:
        """A `cancelled` answer (from a client on another replica, or over `POST /rpc`), as
        a WebSocket client's `cancelled`: the question ends refused. True if it was pending."""
        pending = self.pending.get(request_id)
        if pending is None or pending.future.done():
            return False
        pending.future.set_result(PermissionAnswer(PermissionOutcome.CANCELLED))
        return True

    def forget_sink(self, sink_id: str) -> None:
        """A client detached: its unanswered questions are withdrawn (others may answer)."""
        for pending in list(self.pending.values()):
            task = pending.asked.pop(sink_id, None)
            if task:
                task.cancel()
                if not task.done():
                    pending.errors.append(f"{sink_id}: disconnected")
                self._unanswerable(pending)

    def _unanswerable(self, pending: PendingPermission, running: asyncio.Task[Any] | None = None) -> None:
        """Once every client asked has failed to answer (an error, or it left) and none is
        still asked, the question ends refused at once (`unanswered`) rather than at its
        timeout. A question nobody could be asked (no client attached) still waits: a
        client may attach, or answer over `_agentd/permission/respond`."""
        if pending.future.done() or not pending.errors:
            return
        if any(not t.done() and t is not running for t in pending.asked.values()):
            return
        pending.future.set_result(PermissionAnswer(PermissionOutcome.UNANSWERED))

    def options(self, request_id: str) -> list[str] | None:
        pending = self.pending.get(request_id)
        return None if pending is None else [o["optionId"] for o in pending.options]
