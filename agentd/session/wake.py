"""Waking an idle session when a background task finishes (a "后台通知" prompt).

The seed counts a background notification among the sources of a prompt (001: "根据
prompt_id 判断这条输入从哪来（用户、定时任务、后台通知、goal 等）"). When a background task
(a `bash` with run_in_background, a background sub-agent) ends by itself while no turn runs
and nothing waits in the queue, the session queues a prompt of source `task_notification`
through its ordinary queue (`PromptQueue.submit`: same order, holds, cancel and single
actor as any prompt); the turn it starts reads the task's reminder in its first request
(`agentd/loop/task_notices.py`) — the prompt itself adds no user message.

Guards, so an unattended session cannot spin: waking is a setting (`wake_on_task_finish`);
at most `wake_max_consecutive` wake turns run in a row without a user prompt (then a notice
says so and the news waits for the user); a task that was killed or lost with its process
wakes nothing (someone stopped it; a restart is not news worth tokens); after a cancelled
turn nothing wakes until the user prompts again; prompts waiting in the queue (held ones
too) carry the reminder themselves, so they are never overtaken.

`decide_wake` is the pure decision; `maybe_wake` reads the actor and acts on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sized
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from agentd.core import Notice, NoticeSeverity
from agentd.session.commands import Prompt, PromptDone, PromptSource

if TYPE_CHECKING:
    from agentd.loop import SessionLoopState
    from agentd.session.eventlog import Journal
    from agentd.session.queue import PromptQueue
    from agentd.session.services import ActorServices
    from agentd.tools import BackgroundTasks


class _Stopping(Protocol):
    @property
    def stopping(self) -> bool: ...


class WakeHost(Protocol):
    """The actor as `maybe_wake` sees it: only these names (the actor need not be imported,
    so no type-only cycle runs through it)."""

    @property
    def services(self) -> ActorServices: ...
    @property
    def background(self) -> BackgroundTasks: ...
    @property
    def loop_state(self) -> SessionLoopState: ...
    @property
    def running(self) -> object | None: ...  # only whether a turn runs
    @property
    def queue(self) -> Sized: ...
    @property
    def stop_state(self) -> _Stopping: ...
    @property
    def wake(self) -> WakeStreak: ...
    @property
    def desk(self) -> PromptQueue: ...
    @property
    def owner(self) -> str: ...
    @property
    def journal(self) -> Journal: ...


class WakeDecision(StrEnum):
    WAKE = "wake"
    OFF = "off"  # the setting is off
    BUSY = "busy"  # a turn runs, prompts wait or the session stops: they carry the news
    NOTHING = "nothing"  # no unseen end of a task that ended by itself
    PAUSED = "paused"  # the last turn was cancelled: wait for the user
    CAPPED = "capped"  # `cap` wake turns in a row without a user prompt


@dataclass(frozen=True)
class WakeState:
    enabled: bool
    turn_running: bool
    queued: int  # prompts waiting (held ones included)
    stopping: bool
    news: int  # finished tasks whose end the model has not seen and that ended by themselves
    streak: int  # wake turns since the last user prompt
    cap: int
    paused: bool


def decide_wake(s: WakeState) -> WakeDecision:
    if not s.enabled:
        return WakeDecision.OFF
    if s.turn_running or s.queued or s.stopping:
        return WakeDecision.BUSY
    if s.news == 0:
        return WakeDecision.NOTHING
    if s.paused:
        return WakeDecision.PAUSED
    if s.streak >= s.cap:
        return WakeDecision.CAPPED
    return WakeDecision.WAKE


def should_wake(s: WakeState) -> bool:
    return decide_wake(s) is WakeDecision.WAKE


@dataclass
class WakeStreak:
    """The session's wake turns since its last user prompt (in memory: a restart starts
    over, and starts no wake turn of its own)."""

    count: int = 0
    paused: bool = False
    told_capped: bool = False  # the cap's notice went out for this streak

    def turn_started(self, source: PromptSource) -> None:
        if source is PromptSource.TASK_NOTIFICATION:
            self.count += 1
        else:  # the user is back: a fresh allowance
            self.count, self.paused, self.told_capped = 0, False, False


def wake_state(actor: WakeHost) -> WakeState:
    settings = actor.services.settings
    unseen = [*actor.background.unreported(), *actor.loop_state.subagents.unreported()]
    return WakeState(
        enabled=settings.wake_on_task_finish,
        turn_running=actor.running is not None,
        queued=len(actor.queue),
        stopping=actor.stop_state.stopping,
        news=sum(1 for c in unseen if c.end.on_its_own) if unseen else 0,
        streak=actor.wake.count,
        cap=settings.wake_max_consecutive,
        paused=actor.wake.paused,
    )


def maybe_wake(actor: WakeHost) -> WakeDecision:
    """In the actor's step: queue a `task_notification` prompt if the session should wake."""
    decision = decide_wake(wake_state(actor))
    if decision is WakeDecision.WAKE:
        reply: asyncio.Future[PromptDone] = asyncio.get_running_loop().create_future()
        reply.add_done_callback(lambda f: f.cancelled() or f.exception())  # nobody waits for it
        actor.desk.submit(Prompt([], reply, principal=actor.owner, source=PromptSource.TASK_NOTIFICATION))
    elif decision is WakeDecision.CAPPED and not actor.wake.told_capped:
        actor.wake.told_capped = True
        cap = actor.services.settings.wake_max_consecutive
        title = (
            f"A background task finished, but {cap} turns in a row already started on their own; "
            "its notice waits for your next prompt"
        )
        notice = Notice(title, NoticeSeverity.INFO)
        actor.journal.emit(notice)
    return decision
