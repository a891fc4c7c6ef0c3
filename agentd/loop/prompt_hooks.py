"""`user_prompt_submit` hooks (issue 30 item 7): asked once a user's prompt is in the
conversation and before anything is sampled — 001's L2 opening: "把用户消息写进 ChatState；
跑 UserPromptSubmit hook". Two sources, as for stop hooks: the hooks file and client-registered
hooks. A hook may add context (a `<system-reminder>` after the prompt) or block the prompt
(it leaves the conversation, the turn ends without sampling, the reason is shown).

`merge_prompt_verdicts` is the pure merge (any block wins, reasons joined; the contexts of
the others are kept in order); `run_prompt_hooks` asks every hook (a failing hook fails open)
and records their verdicts on a `prompt_hooks` event.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentd.core import PromptHooksRan, prompt_hook_payload
from agentd.loop.context import TurnCancelled, TurnContext, run_cancellable
from agentd.loop.turn_reminders import Reminder, ReminderKind
from agentd.tools import HookDecision, HookVerdict


def merge_prompt_verdicts(verdicts: Sequence[HookVerdict]) -> HookVerdict:
    """One verdict for all hooks: block when any blocks (their reasons joined); else allow,
    carrying every context in the order the hooks were asked."""
    blocks = [v for v in verdicts if v.decision is HookDecision.BLOCK]
    if blocks:
        reason = "; ".join(v.reason for v in blocks if v.reason) or "blocked by a hook"
        return HookVerdict(HookDecision.BLOCK, reason, hook="merged")
    context = "\n".join(v.context for v in verdicts if v.context) or None
    return HookVerdict(HookDecision.ALLOW, context=context, hook="merged")


def context_reminder(verdict: HookVerdict) -> Reminder | None:
    """The context an allowing verdict adds for the model, as a reminder."""
    if verdict.decision is not HookDecision.ALLOW or not verdict.context:
        return None
    return Reminder(ReminderKind.PROMPT_HOOK, verdict.context)


def blocked_text(verdict: HookVerdict) -> str:
    """What the user is told when a hook blocked the prompt."""
    return f"A user_prompt_submit hook blocked this prompt: {verdict.reason or 'no reason given'}"


async def run_prompt_hooks(ctx: TurnContext, prompt: str, prompt_id: str) -> HookVerdict:
    """Ask every user_prompt_submit hook about `prompt`; merge their verdicts."""
    payload = prompt_hook_payload(ctx.session_id, ctx.cwd, ctx.turn_id, prompt_id, prompt)
    verdicts: list[HookVerdict] = []
    for hook in ctx.prompt_hooks:
        try:
            verdict = await run_cancellable(hook.user_prompt_submit(payload), ctx.cancel)
        except TurnCancelled:
            raise
        except Exception as exc:  # a hook must never wedge the session
            name = getattr(hook, "name", "?")
            verdict = HookVerdict(HookDecision.ALLOW, f"hook failed: {exc}", hook=name, failed_open=True)
        verdicts.append(verdict)
    ctx.events.emit(PromptHooksRan([v.to_event() for v in verdicts]))
    return merge_prompt_verdicts(verdicts)
