"""A command routed here from another replica marks its session watched (live_watch.py):
the caller's client follows the session there, so its live text goes to the broker from
the first chunk, without waiting for that replica's announcement to arrive."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from agentd.session.replicas.live_watch import Watched
from agentd.store.routed import RoutedCommand
from agentd.transport.routed import execute


class Dispatcher:
    def __init__(self) -> None:
        self.methods: list[str] = []

    async def call(self, request: Any, ctx: Any) -> dict[str, Any]:
        self.methods.append(request.method)
        return {"stopReason": "end_turn"}


def command(session_id: str) -> RoutedCommand:
    return RoutedCommand(1, session_id, "replica-b", "session/prompt", "alice", (), {"sessionId": session_id})


async def test_a_routed_command_marks_its_session_watched_before_it_runs() -> None:
    watched = Watched(clock=lambda: 0.0)
    seen: list[bool] = []
    dispatcher = Dispatcher()

    async def call(request: Any, ctx: Any) -> dict[str, Any]:
        seen.append(watched("s1"))  # already while the command runs
        return await Dispatcher.call(dispatcher, request, ctx)

    dispatcher.call = call  # type: ignore[method-assign]
    state = SimpleNamespace(
        dispatcher=dispatcher, services=SimpleNamespace(live=SimpleNamespace(watched=watched))
    )
    outcome = await execute(cast(Any, state), command("s1"))
    assert outcome == {"result": {"stopReason": "end_turn"}} and seen == [True]
    assert watched("s1") and not watched("s2") and watched.heard == 0  # (not counted as heard)


async def test_without_a_broker_a_routed_command_just_runs() -> None:
    dispatcher = Dispatcher()
    state = SimpleNamespace(dispatcher=dispatcher, services=SimpleNamespace(live=None))
    assert await execute(cast(Any, state), command("s1")) == {"result": {"stopReason": "end_turn"}}
    assert dispatcher.methods == ["session/prompt"]
