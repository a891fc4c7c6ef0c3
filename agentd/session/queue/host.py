"""The actor as its queue desk (`PromptQueue`) sees it: only the names the desk uses, so the
desk never imports the actor (whose module imports the desk)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from agentd.core import GoalState
    from agentd.loop import TurnContext
    from agentd.session.commands import PromptDone, SessionCommand
    from agentd.session.eventlog import Journal
    from agentd.session.services import ActorServices


class _Waited(Protocol):
    @property
    def waiters(self) -> list[asyncio.Future[PromptDone]]: ...


class _Turn(Protocol):
    """The running turn as the desk sees it (an interjection or a `send_now` reaches it)."""

    @property
    def id(self) -> str: ...
    @property
    def prompt(self) -> _Waited: ...  # an entry moved into the turn is answered with it
    @property
    def ctx(self) -> TurnContext: ...


class DeskHost(Protocol):
    """The actor the desk works for, as the desk sees it."""

    @property
    def id(self) -> str: ...
    @property
    def services(self) -> ActorServices: ...
    @property
    def journal(self) -> Journal: ...
    @property
    def goal(self) -> GoalState | None: ...
    @property
    def running(self) -> _Turn | None: ...
    def send(self, command: SessionCommand) -> None: ...
    def start_next_turn(self) -> None: ...
