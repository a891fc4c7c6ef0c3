"""Pieces every part of the L3 loop (`react`) uses: ending a turn with its outcome,
recording a retry decision, and compacting the conversation (R-L3d)."""

from __future__ import annotations

from typing import Any

from agentd.core import (
    CompactionProgress,
    CompactionStatus,
    EndReason,
    HarnessError,
    OutcomeKind,
    Reason,
    RetryDecided,
    TurnOutcome,
    compaction_record,
)
from agentd.loop.compaction import CompactionReason, compact, compactable
from agentd.loop.context import TurnContext, run_cancellable
from agentd.loop.react.state import TurnState
from agentd.loop.retry import LoopDecision


def _compaction_progress(ctx: TurnContext, update: CompactionProgress) -> None:
    ctx.events.emit_transient(update)


async def run_compaction(
    ctx: TurnContext,
    state: TurnState | None = None,
    reason: CompactionReason | str = CompactionReason.REQUESTED,
) -> bool:
    """Fold older history into a summary (R-L3d). True when the conversation changed.
    A failing summariser leaves the conversation as it was. Without a turn's `state`
    (`/compact` answered locally) it is asked for by the user."""
    state = state if state is not None else TurnState()
    reason = CompactionReason(reason)
    if not compactable(ctx.conversation.messages, ctx.limits.compaction):
        return False  # say nothing: there is no compaction to report
    progress_id = f"compaction_{ctx.turn_id}_{state.iteration}"
    _compaction_progress(ctx, CompactionProgress(progress_id, CompactionStatus.IN_PROGRESS))
    try:
        result = await run_cancellable(
            compact(
                ctx.provider,
                ctx.model,
                ctx.conversation.messages,
                ctx.limits.compaction,
                compaction_id=progress_id,
            ),
            ctx.cancel,
        )
    except HarnessError as err:
        _compaction_progress(ctx, CompactionProgress(progress_id, CompactionStatus.FAILED, err.message))
        state.compactions.append({"reason": reason.value, "failed": err.kind.value})
        return False
    if result is None:
        _compaction_progress(
            ctx,
            CompactionProgress(progress_id, CompactionStatus.CANCELLED, "nothing old enough to compact"),
        )
        return False
    ctx.conversation.replace(result.messages)
    completed = result.to_update(reason)
    ctx.events.emit(completed)
    state.compactions.append(compaction_record(reason.value, len(result.replaced)))
    state.context_tokens = 0  # the provider's last report no longer describes the request
    return True


def ended_outcome(
    state: TurnState,
    kind: OutcomeKind,
    reason: Reason | None = None,
    *,
    error: HarnessError | None = None,
    refusal: bool = False,
    max_tokens: bool = False,
    structured_output: dict[str, Any] | None = None,
) -> TurnOutcome:
    return TurnOutcome(
        kind,
        reason=reason,
        refusal=refusal,
        max_tokens=max_tokens,
        tools_called=state.tools_called,
        error=error,
        # No `turn` summary here: L3's outcome only goes up to L2, which takes the turn's
        # summary once, at its very end (`turn.run_turn`), and puts it on the outcome.
        structured_output=structured_output,
    )


def cancelled_outcome(state: TurnState) -> TurnOutcome:
    return ended_outcome(state, OutcomeKind.CANCELLED, EndReason.USER_CANCELLED)


def record_decision(ctx: TurnContext, state: TurnState, decision: LoopDecision, err: HarnessError) -> None:
    ctx.persist({"retry_state": ctx.retry.to_dict()})
    retry = RetryDecided(
        decision.to_event(), error={"kind": err.kind.value, "message": err.message}, lane=ctx.lane
    )
    state.retries.append(retry.to_record())
    ctx.events.emit(retry)
