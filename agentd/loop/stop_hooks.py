"""Stop hooks (R-L2d): asked when the agent is about to stop; one may send it back to work.

`merge_stop_verdicts` is the pure merge (prevent beats block beats allow; blocks join their
reasons), `keep_working_text` the feedback a block injects; `run_stop_hooks` asks every hook
(a failing hook fails open), records the verdicts on an event and returns the merge.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentd.core import StopHooksRan, stop_hook_payload
from agentd.loop.context import TurnCancelled, TurnContext, run_cancellable
from agentd.tools import HookDecision, HookVerdict


def merge_stop_verdicts(verdicts: Sequence[HookVerdict]) -> HookVerdict:
    """One verdict for all hooks: the first prevent wins; else all blocks merge into one;
    else allow."""
    for verdict in verdicts:
        if verdict.decision is HookDecision.PREVENT:
            return verdict
    blocks = [v for v in verdicts if v.decision is HookDecision.BLOCK]
    if blocks:
        reason = "; ".join(v.reason for v in blocks if v.reason) or None
        context = "\n".join(v.context for v in blocks if v.context) or None
        return HookVerdict(HookDecision.BLOCK, reason, context, hook="merged")
    return HookVerdict(HookDecision.ALLOW, hook="merged")


def keep_working_text(verdict: HookVerdict) -> str:
    """The user message a blocking verdict sends the agent back to work with."""
    feedback = f"[stop hook] Keep working: {verdict.reason or 'the task is not finished'}"
    if verdict.context:
        feedback += f"\n{verdict.context}"
    return feedback


async def run_stop_hooks(ctx: TurnContext, reentries: int) -> HookVerdict:
    """Ask every stop hook; merge their verdicts. Failing hooks fail open."""
    last = next(
        (m.content for m in reversed(ctx.conversation.messages) if m.role == "assistant" and m.content), ""
    )
    # A sub-agent's stop payload adds its SubagentStop fields (agentd.core.subagent_stop_payload).
    payload = stop_hook_payload(ctx.session_id, ctx.cwd, ctx.turn_id, last, reentries, ctx.stop_payload)
    verdicts: list[HookVerdict] = []
    for hook in ctx.stop_hooks:
        try:
            verdict = await run_cancellable(hook.stop(payload), ctx.cancel)
        except TurnCancelled:
            raise
        except Exception as exc:  # a hook must never wedge the session
            verdict = HookVerdict(
                HookDecision.ALLOW, f"hook failed: {exc}", hook=getattr(hook, "name", "?"), failed_open=True
            )
        verdicts.append(verdict)
    ctx.events.emit(StopHooksRan(reentries, [v.to_event() for v in verdicts]))
    return merge_stop_verdicts(verdicts)
