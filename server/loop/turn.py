"""The turn loop, L2 (R-L2). Without goals or stop hooks a turn is one L3 run (R-L2a);
goals, stop hooks and completion recovery wrap around this call in later work."""

from __future__ import annotations

import logging

from server.loop.context import TurnCancelled, TurnContext
from server.loop.errors import ErrorKind, HarnessError
from server.loop.outcome import OutcomeKind, TurnOutcome
from server.loop.react import run_compaction, run_react
from server.loop.turn_state import TurnState

log = logging.getLogger(__name__)


async def run_turn(ctx: TurnContext) -> TurnOutcome:
    try:
        return await run_react(ctx)
    except HarnessError as err:
        return TurnOutcome.failed(err)
    except Exception as exc:  # a bug must end the turn readably, not kill the session
        log.exception("turn %s crashed", ctx.turn_id)
        return TurnOutcome.failed(
            HarnessError(ErrorKind.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")
        )


async def run_compaction_job(ctx: TurnContext) -> TurnOutcome:
    """A queued `/compact`: fold the history without sampling the agent."""
    state = TurnState()
    try:
        await run_compaction(ctx, state, "requested")
    except TurnCancelled:
        return TurnOutcome.cancelled("user_cancelled")
    except Exception as exc:
        log.exception("compaction job %s crashed", ctx.turn_id)
        return TurnOutcome.failed(HarnessError(ErrorKind.INTERNAL, f"compaction failed: {exc}"))
    return TurnOutcome(OutcomeKind.COMPLETED, turn=state.summary())
