"""Sampling with recovery for the L3 loop (`react`): typed provider errors go through the
retry buckets, and a degenerate response goes back to the call retry ladder."""

from __future__ import annotations

import asyncio

from agentd.core import (
    DegenerationReason,
    HarnessError,
    Notice,
    OutcomeKind,
    ProviderRequest,
    RetryDecided,
    TurnOutcome,
    Usage,
)
from agentd.loop.compaction import CompactionReason
from agentd.loop.context import TurnCancelled, TurnContext, run_cancellable
from agentd.loop.detection import RepetitionHit, RetriableHit, retriable_response
from agentd.loop.react.base import cancelled_outcome, ended_outcome, record_decision, run_compaction
from agentd.loop.react.sampling import Sample, commit_sample, stream_sample
from agentd.loop.react.state import TurnState
from agentd.loop.retry import Bucket, Decision


class Rebuild:
    """Marker: the request must be built again (the context was compacted)."""


_REBUILD = Rebuild()


DEGENERATE_TEXT = "[This response kept repeating itself; it was cut off and discarded.]"


class Accept:
    """Marker: the doom-loop budget is spent, the repetitive answer is taken as it is."""


_ACCEPT = Accept()


async def _retry_degenerate(
    ctx: TurnContext, state: TurnState, sample: Sample, hit: RepetitionHit | RetriableHit
) -> TurnOutcome | Accept | None:
    """A response cut as repetitive text goes back to the call retry ladder (003:
    `is_repetitive_output` → "响应层回到调用重试梯"), as octos does: its content is replaced
    (the stored final text says what happened, and the discarded attempt never enters the
    conversation), its tool calls go with it (the cut response is incomplete), and the call
    is made again after a backoff. None: sample again; an outcome once the
    `degenerate_output` bucket is exhausted (a degeneration stop, R-L3b) — except for
    repetitive text, which is then accepted as it is (`Accept`; 000: "采样器内的 doom-loop…检出
    循环即"毒化"该次尝试重新采样，预算耗尽则原样接受；各预算互不串账")."""
    bucket = Bucket.DEGENERATE_OUTPUT
    spent = ctx.retry.count(bucket) >= ctx.retry.limits.limit(bucket)
    if isinstance(hit, RepetitionHit) and spent:
        decision = ctx.retry.observe_degenerate_output()
        ctx.persist({"retry_state": ctx.retry.to_dict()})
        accepted = {**hit.as_data(), "accepted": True}
        state.nudges.append(accepted)
        retry = RetryDecided(decision.to_event(), degenerate=accepted, lane=ctx.lane)
        state.retries.append(retry.to_record())
        ctx.events.emit(retry)
        return _ACCEPT
    state.usage.record(ctx.lane, sample.usage, ctx.prices.get(ctx.model))  # spent all the same
    state.nudges.append(hit.as_data())
    if isinstance(hit, RepetitionHit):
        sample.text = DEGENERATE_TEXT
    sample.tool_calls = []
    commit_sample(ctx, sample, discarded=True)
    decision = ctx.retry.observe_degenerate_output()
    ctx.persist({"retry_state": ctx.retry.to_dict()})
    retry = RetryDecided(decision.to_event(), degenerate=hit.as_data(), lane=ctx.lane)
    state.retries.append(retry.to_record())
    ctx.events.emit(retry)
    if not decision.retries:
        what = "kept repeating itself" if isinstance(hit, RepetitionHit) else "kept answering nothing"
        notice = Notice(f"The model {what} ({decision.attempt} responses in a row); the turn stopped.")
        ctx.events.emit(notice)
        if hit.reason is DegenerationReason.FILTERED_RESPONSE:  # still filtered: it is a refusal
            return ended_outcome(state, OutcomeKind.COMPLETED, refusal=True)
        return ended_outcome(state, OutcomeKind.STATIONARITY_ENDED, hit.reason)
    try:
        await run_cancellable(asyncio.sleep(decision.delay_s), ctx.cancel)
    except TurnCancelled:
        return cancelled_outcome(state)
    return None


# The buckets a clean response resets (see the end of `sample_with_recovery`).
_RESET_ON_SUCCESS = (Bucket.DEGENERATE_OUTPUT, Bucket.AUTHENTICATION)


async def sample_with_recovery(
    ctx: TurnContext, state: TurnState, request: ProviderRequest
) -> Sample | TurnOutcome | Rebuild:
    """Sample once; typed provider errors go through the retry buckets, which decide:
    retry after a delay, rotate to the next lane, compact and rebuild, or give up. So does
    a response cut as repetitive text (`_retry_degenerate`)."""
    while True:
        sample = Sample()
        try:
            await run_cancellable(stream_sample(ctx, request, sample), ctx.cancel)
        except TurnCancelled:
            # Keep what was streamed: the model should know what it already said. Its usage
            # is unknown (cancel never waits for a slow usage drain): the ledger is dirty.
            state.usage.record(ctx.lane, sample.usage, ctx.prices.get(ctx.model))
            sample.tool_calls.clear()
            commit_sample(ctx, sample)
            return cancelled_outcome(state)
        except HarnessError as err:
            # A discarded attempt still cost tokens on its lane (or its usage is unknown). A
            # request refused with an HTTP error before any output spent nothing.
            refused = err.status is not None and not (sample.text or sample.reasoning or sample.tool_calls)
            usage = sample.usage if sample.usage is not None or not refused else Usage()
            state.usage.record(ctx.lane, usage, ctx.prices.get(ctx.model))
            commit_sample(ctx, sample, discarded=True)
            decision = ctx.retry.observe(err, has_fallback=bool(ctx.fallbacks))
            record_decision(ctx, state, decision, err)
            match decision.decision:
                case Decision.CONTINUE:
                    try:
                        await run_cancellable(asyncio.sleep(decision.delay_s), ctx.cancel)
                    except TurnCancelled:
                        return cancelled_outcome(state)
                    continue
                case Decision.ROTATE_AND_RETRY:
                    ctx.rotate_lane()
                    request.model = ctx.model
                    continue
                case Decision.COMPACT_AND_RETRY if not state.overflow_compacted:
                    # Compact and retry, once per turn (the bucket also counts across turns).
                    state.overflow_compacted = True
                    try:
                        if await run_compaction(ctx, state, CompactionReason.CONTEXT_OVERFLOW):
                            return _REBUILD
                    except TurnCancelled:
                        return cancelled_outcome(state)
                    return ended_outcome(state, OutcomeKind.FAILED, err.kind, error=err)
                case _:
                    return ended_outcome(state, OutcomeKind.FAILED, err.kind, error=err)
        hit = sample.degenerate or retriable_response(
            sample.text,
            bool(sample.reasoning or sample.reasoning_blocks),
            len(sample.tool_calls),
            sample.stop,
        )
        if hit is not None:  # 003: "响应层回到调用重试梯"
            degenerate = await _retry_degenerate(ctx, state, sample, hit)
            if degenerate is None:
                continue
            if not isinstance(degenerate, Accept):
                return degenerate
        state.usage.record(ctx.lane, sample.usage, ctx.prices.get(ctx.model))
        if sample.usage is not None:
            ctx.budget.record_usage(sample.usage)
        ctx.budget.mark_progress()
        # A success resets no provider bucket: a storm spread over turns must still exhaust
        # it (seed 003); the buckets' sliding window forgives old failures instead (retry.py).
        # Only the repetition streak ends with a clean response (octos' per-call retry), and an
        # authentication episode with an authenticated call (its own schedule, 000).
        reset = ctx.retry.failing(_RESET_ON_SUCCESS)
        for bucket in reset:
            ctx.retry.record_success(bucket)
        if reset:
            ctx.persist({"retry_state": ctx.retry.to_dict()})
        return sample
