"""What a running turn works with: the conversation, the provider, the tools, and the
session-side services it calls back into (events, permissions, cancellation).

The loop only sees these protocols; the session actor implements them. That keeps the
loop testable without a server and keeps session state owned by the actor.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from types import CoroutineType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from agentd.core import (
    CompletionRequirement,
    CompletionSource,
    Conversation,
    GoalState,
    Interjection,
    PermissionMode,
    Price,
    Provider,
    ToolCallIds,
    Update,
    UsageLedger,
)
from agentd.core import Lane as Lane
from agentd.core import PermissionAnswer as PermissionAnswer
from agentd.loop import cancel_wait
from agentd.loop.budget import BudgetLimits, BudgetState
from agentd.loop.cancel_wait import waiters_of
from agentd.loop.limits import LoopLimits
from agentd.loop.retry import RetryState
from agentd.loop.structured import OutputSchema
from agentd.loop.turn_reminders import LiveTools, ReminderMemory, TurnOpening
from agentd.tools import (
    AgentTasks,
    BackgroundTasks,
    ClientBridge,
    PreToolHook,
    PromptHook,
    Remembered,
    StopHook,
    TodoList,
    Tool,
)

if TYPE_CHECKING:
    from agentd.tools import ShellLauncher

T = TypeVar("T")


class ChildAgents(AgentTasks, CompletionSource, Protocol):
    """What a turn needs of the session's sub-agents (`agentd.loop.subagents.registry.Subagents`, which
    runs turns itself, so this module names it by what it does): `task_output`'s view, the
    reminders' source, and whether a background child of a turn still runs."""

    def live_from(self, turn_id: str) -> bool: ...


class TurnCancelled(Exception):
    """The user (or the server) cancelled the turn while we were waiting."""


class _Waker:
    """Put on the cancel event's waiters in place of a future (`Event.set` calls `done()`
    and `set_result()` on each): `set()` cancels the waiting task at once — no done callback
    scheduled for later, which could land after the wait ended and cancel the wrong thing."""

    __slots__ = ("cancelled", "fired", "task")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task: asyncio.Task[Any] | None = task  # None once the wait ended
        self.fired = False  # `cancel.set()` came during the wait
        self.cancelled = False  # and we cancelled the task for it (one cancel to take back)

    def done(self) -> bool:
        return self.fired

    def set_result(self, _: object) -> None:
        self.fired = True
        if self.task is asyncio.current_task():
            # The operation set the cancel itself: its task runs now, so a cancel requested now
            # would stay pending past the wait if the operation never awaits again. Cancel it
            # once it is suspended, if it still waits.
            asyncio.get_running_loop().call_soon(self._cancel)
        else:
            self._cancel()

    def _cancel(self) -> None:
        if self.task is not None:
            self.cancelled = True
            self.task.cancel()


async def run_cancellable(aw: Coroutine[Any, Any, T] | Awaitable[T], cancel: asyncio.Event) -> T:
    """Await `aw` unless `cancel` fires first; then cancel it, wait for its cleanup
    (a killed process group, a closed stream) and raise `TurnCancelled`.

    By default `aw` runs in the caller's task (no task of its own: ~12 calls and a loop
    iteration less per call); `cancel.set()` cancels that task, and the cancel is taken back
    (`Task.uncancel`) and raised as `TurnCancelled` once `aw` has ended. A cancel of the task
    from elsewhere (shutdown, an actor's kill) still propagates as `CancelledError`.
    `AGENTD_CANCEL_WAIT=task` (or `asyncio`) runs `aw` in a task of its own, as before."""
    if cancel.is_set():
        # (`type(aw) is CoroutineType` first: a plain coroutine needs no iscoroutine call)
        if type(aw) is CoroutineType or asyncio.iscoroutine(aw):
            aw.close()
        raise TurnCancelled
    if not cancel_wait.INLINE_CANCEL_WAIT:
        return await _run_in_task(aw, cancel, waiters_of(cancel))
    # (`waiters_of`, spelt out: one call, not three; a `_Waker` stands where futures do)
    wakers: collections.deque[Any] | None = getattr(cancel, "_waiters", None)
    task = asyncio.current_task()
    if task is None or type(wakers) is not collections.deque:
        return await _run_in_task(aw, cancel, waiters_of(cancel))
    base = task.cancelling()  # cancels requested before this wait are not ours to judge
    waker = _Waker(task)
    wakers.append(waker)
    try:
        result = await aw
    except asyncio.CancelledError:
        if not waker.cancelled or task.uncancel() > base:
            raise  # a cancel from elsewhere (alone or beside ours): it propagates
        raise TurnCancelled from None
    except Exception as exc:
        if waker.cancelled:
            task.uncancel()
        if task.cancelling() > base:  # it turned a cancel from elsewhere into an error
            raise asyncio.CancelledError from exc
        if not waker.cancelled:
            raise
        # The operation failed while being cancelled: cancellation wins (as on the task path).
        raise TurnCancelled from None
    finally:
        waker.task = None
        try:  # (`Event.wait` takes its own off so too; no contextlib.suppress: 3 calls)
            wakers.remove(waker)
        except ValueError:
            pass
    if waker.cancelled:  # it swallowed our cancel: the turn is cancelled all the same
        task.uncancel()
        if task.cancelling() > base:
            raise asyncio.CancelledError
        raise TurnCancelled
    if task.cancelling() > base:
        raise asyncio.CancelledError  # it swallowed a cancel from elsewhere: never lost
    # (`cancel.set()` by the operation itself, which then ended without waiting again: its
    # result stands, as on the task path, where the ended task's result wins.)
    return result


async def _run_in_task(
    aw: Coroutine[Any, Any, T] | Awaitable[T],
    cancel: asyncio.Event,
    waiters: collections.deque[asyncio.Future[Any]] | None,
) -> T:
    """`aw` in a task of its own (the task path: `AGENTD_CANCEL_WAIT=task|asyncio`)."""
    coro = type(aw) is CoroutineType or asyncio.iscoroutine(aw)
    if waiters is None:
        task = await _wait_library(aw, cancel)
    else:
        # One future, completed by whichever comes first: the operation's end or `cancel.set()`.
        loop = asyncio.get_running_loop()
        task = loop.create_task(aw) if coro else asyncio.ensure_future(aw)  # type: ignore[arg-type]
        woken = loop.create_future()

        def wake(_: object) -> None:
            if not woken.done():
                woken.set_result(True)

        task.add_done_callback(wake)
        waiters.append(woken)
        try:
            await woken
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            task.remove_done_callback(wake)
            try:  # (`Event.wait` takes its own off so too; no contextlib.suppress: 3 calls)
                waiters.remove(woken)
            except ValueError:
                pass
    if task.done():
        return task.result()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    except Exception:  # the operation failed while being cancelled: cancellation wins
        pass
    raise TurnCancelled


async def _wait_library(
    aw: Coroutine[Any, Any, T] | Awaitable[T], cancel: asyncio.Event
) -> asyncio.Future[T]:
    """The operation's task, once it ended or `cancel` fired (`asyncio.wait` on both)."""
    task = asyncio.ensure_future(aw)
    waiter = asyncio.ensure_future(cancel.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        waiter.cancel()
        raise
    if task.done():
        waiter.cancel()
    return task


class EventSink(Protocol):
    def emit(self, update: Update, *, origin: str | None = None) -> None:
        """A durable event (gets a seq, committed before delivery)."""
        ...

    def emit_transient(self, update: Update) -> None: ...

    def flushed(self) -> Awaitable[None]:
        """Resolves once every event emitted so far reached the clients' queues (a future,
        or a coroutine)."""
        ...


class PermissionGate(Protocol):
    def mode(self) -> PermissionMode: ...

    def plan(self) -> bool:
        """The plan gate (independent of `mode`): on, no write or command runs."""
        ...

    def remembered(self, tool_name: str) -> Remembered | None: ...

    def remember(self, tool_name: str, answer: Remembered) -> None: ...

    async def ask(self, tool_call: dict[str, Any], options: list[dict[str, str]]) -> PermissionAnswer: ...


@dataclass
class TurnContext:
    session_id: str
    turn_id: str
    cwd: Path
    provider: Provider
    model: str
    system_prompt: str
    tools: dict[str, Tool]
    conversation: Conversation
    events: EventSink
    permissions: PermissionGate
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    # User input sent into this running turn (R-S4), drained before each sampling round;
    # `interrupted` is set while some wait, so waiting tools return early (R-T7).
    interjections: list[Interjection] = field(default_factory=list)
    interrupted: asyncio.Event = field(default_factory=asyncio.Event)
    todos: TodoList = field(default_factory=TodoList)
    background: BackgroundTasks | None = None
    output_schema: OutputSchema | None = None  # the prompt's schema for the final answer
    max_turns: int | None = None  # tool rounds allowed in one L3 run (None: no cap)
    # Writes to one path are serialised across concurrent calls (R-T2); session-wide.
    path_locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    pre_tool_hooks: list[PreToolHook] = field(default_factory=list)
    context_window: int = 128_000  # tokens of the session's model (compaction threshold base)
    compact_requested: bool = False  # `/compact` or `_agentd/session/compact` during the turn
    # The provider chain (R-R3): `provider`/`model` are the current lane; rotation moves
    # to the next fallback. `lane` names the current one for usage attribution.
    lane: str = "primary"
    fallbacks: list[Lane] = field(default_factory=list)
    prices: dict[str, Price] = field(default_factory=dict)  # per model
    # Session-owned retry buckets (R-R2); `persist` saves session fields durably.
    retry: RetryState = field(default_factory=RetryState)
    persist: Callable[[dict[str, Any]], None] = lambda fields: None
    budget_limits: BudgetLimits = field(default_factory=BudgetLimits)
    budget: BudgetState = field(default_factory=BudgetState)
    # Names of tools that actually ran this turn (completion requirement, R-L2b).
    called_tools: set[str] = field(default_factory=set)
    completion: CompletionRequirement | None = None
    goal: GoalState | None = None  # session-owned; the turn updates it
    goal_lanes: list[tuple[Provider, str]] = field(default_factory=list)  # evaluator: small model first
    # With no `goal_lanes`, the lanes are this small model first, then the turn's (goal_lanes()).
    goal_evaluator_model: str | None = None
    limits: LoopLimits = field(default_factory=LoopLimits)  # every loop constant in force
    stop_hooks: list[StopHook] = field(default_factory=list)
    # Every toolCallId the session has used on the wire: a provider that reuses ids
    # (`call_0` every step) must not make two ACP tool calls look like one.
    used_tool_call_ids: set[str] = field(default_factory=ToolCallIds)
    client: ClientBridge | None = None  # the prompting editor's fs/terminal (R-T6)
    # The prompt's meta: its W3C `traceparent`/`tracestate`, if any, parent the turn's span.
    trace_meta: dict[str, Any] = field(default_factory=dict)
    # Called with the paths a write tool is about to change, before it runs (R-T12 snapshots).
    before_write: Callable[[list[str]], Awaitable[None]] | None = None
    # How commands start (the sandbox): the goal's verification command too. None: unconfined.
    shell: ShellLauncher | None = None
    # Sub-agents (R-T11): the session's registry; this agent's nesting depth (the session's
    # agent is 0); extra fields of the stop-hook payload (a child's SubagentStop); and the
    # usage of finished foreground children, rolled up into this turn's ledger at its end.
    subagents: ChildAgents | None = None
    depth: int = 0
    stop_payload: dict[str, Any] = field(default_factory=dict)
    child_usage: UsageLedger = field(default_factory=UsageLedger)
    # The L2 opening (issue 30 item 7): the user_prompt_submit hooks, the user prompt that
    # started the turn with the reminders it opened with (None: no user prompt), and the
    # session's memory of what the model was told.
    prompt_hooks: list[PromptHook] = field(default_factory=list)
    opening: TurnOpening | None = None
    reminders: ReminderMemory = field(default_factory=ReminderMemory)
    # The session's MCP tools as they are now (a `session/load` may replace its servers while
    # the turn runs), re-read before each sampling; `live_names` are those now in `tools`.
    # None: the tool set is fixed (a sub-agent's).
    live_tools: Callable[[], LiveTools] | None = None
    live_names: frozenset[str] = frozenset()

    def rotate_lane(self) -> bool:
        """Move to the next provider lane; False when there is none."""
        if not self.fallbacks:
            return False
        nxt = self.fallbacks.pop(0)
        self.provider, self.model, self.lane = nxt.provider, nxt.model, nxt.name
        return True

    def take_interjections(self) -> list[Interjection]:
        taken, self.interjections[:] = list(self.interjections), []
        self.interrupted.clear()
        return taken
