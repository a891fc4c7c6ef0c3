"""Phase 1 of a tool round (R-T8): the calls are approved serially, in order — pre-tool
hooks, the plan gate, the permission mode and remembered answers, then the user when policy
says so. A permission rejection, a user cancel or an interjection is a circuit breaker
(`BreakReason`): later calls are not run and say why."""

from __future__ import annotations

import logging
from enum import StrEnum
from typing import Any

from agentd.core import (
    EndReason,
    PermissionOptionKind,
    PermissionOutcome,
    ToolCallAnnounced,
    pre_tool_payload,
)
from agentd.loop.context import TurnCancelled, TurnContext, run_cancellable
from agentd.loop.react.slot import Slot
from agentd.tools import (
    PERMISSION_OPTIONS,
    Decision,
    HookDecision,
    Remembered,
    ToolContext,
    ToolResult,
    decide,
    plan_gate_refuses,
    plan_mode_refuses,
)

log = logging.getLogger(__name__)


class BreakReason(StrEnum):
    """A circuit breaker of the approval phase; every one ends the turn `Cancelled`."""

    PERMISSION_REJECTED = "permission_rejected"
    USER_CANCELLED = "user_cancelled"
    # New user input arrived during approval; it is not lost: once the turn has ended it
    # runs as the next prompt, ahead of the queue (R-S4).
    INTERJECTED = "interjected"

    @property
    def end_reason(self) -> EndReason:
        """The reason the turn ends with."""
        match self:
            case BreakReason.PERMISSION_REJECTED:
                return EndReason.PERMISSION_REJECTED
            case BreakReason.USER_CANCELLED:
                return EndReason.USER_CANCELLED
            case BreakReason.INTERJECTED:
                return EndReason.INTERJECTED


CANCELLED_EARLIER = "Not run: cancelled because an earlier tool call in this step was {why}."
INTERJECTED_TEXT = "Not run: cancelled because new user input arrived before it was approved."
PLAN_REFUSAL = "Refused: plan mode is read-only, {tool} would change the workspace."


async def _pre_tool_hooks(ctx: TurnContext, slot: Slot) -> ToolResult | None:
    assert slot.tool is not None
    payload = pre_tool_payload(ctx.session_id, ctx.cwd, slot.tool.name, slot.args)
    for hook in ctx.pre_tool_hooks:
        if not hook.applies_to(slot.tool.name):
            continue
        verdict = await hook.pre_tool(payload)
        if verdict.decision is HookDecision.DENY:
            return ToolResult(
                f"Blocked by a hook: {verdict.reason}", is_error=True, raw_output=verdict.to_event()
            )
    return None


async def _with_preview(ctx: TurnContext, slot: Slot, tool_call: dict[str, Any]) -> dict[str, Any]:
    """The permission request's `toolCall` with the tool's preview (what the call will do),
    when it has one; a preview that fails leaves the request as announced."""
    preview = getattr(slot.tool, "preview", None)
    if preview is None or slot.args is None:
        return tool_call
    tool_ctx = ToolContext(cwd=ctx.cwd, session_id=ctx.session_id, client=ctx.client)
    try:
        shown = await run_cancellable(preview(slot.args, tool_ctx), ctx.cancel)
    except TurnCancelled:
        raise
    except Exception as exc:  # a preview is a courtesy: never a reason not to ask
        log.info("no preview for %s: %s", slot.call.name, exc)
        return tool_call
    with_preview: dict[str, Any] = shown.apply(tool_call)
    return with_preview


async def approve(
    ctx: TurnContext, slots: list[Slot], announced: list[ToolCallAnnounced]
) -> BreakReason | None:
    breaker: BreakReason | None = None
    gate = ctx.permissions
    for slot, announcement in zip(slots, announced, strict=True):
        if slot.result is not None or slot.tool is None:
            continue
        if breaker is None and ctx.interrupted.is_set():
            breaker = BreakReason.INTERJECTED
        if breaker is not None:
            if breaker is BreakReason.INTERJECTED:
                text = INTERJECTED_TEXT
            else:
                why = "rejected" if breaker is BreakReason.PERMISSION_REJECTED else "cancelled"
                text = CANCELLED_EARLIER.format(why=why)
            slot.result = ToolResult(text, is_error=True)
            continue
        # (no hooks: no payload to build, no coroutine to run)
        denial = await _pre_tool_hooks(ctx, slot) if ctx.pre_tool_hooks else None
        if denial is not None:
            slot.result = denial  # a hook denial skips only this call
            continue
        if plan_gate_refuses(gate.plan(), slot.tool.access):  # before, and whatever, the permission layer
            slot.result = ToolResult(PLAN_REFUSAL.format(tool=slot.tool.name), is_error=True)
            continue
        mode = gate.mode()
        remembered = gate.remembered(slot.tool.name)
        decision = decide(mode, slot.tool.access, remembered)
        if decision is Decision.ALLOW:
            slot.approved = True
            continue
        if decision is Decision.DENY:
            if plan_mode_refuses(mode, slot.tool.access):
                msg = PLAN_REFUSAL.format(tool=slot.tool.name)
            else:
                msg = f"Refused: the user chose to always reject {slot.tool.name}."
            slot.result = ToolResult(msg, is_error=True)
            continue
        try:
            request = await _with_preview(ctx, slot, announcement.permission_request())
            answer = await run_cancellable(gate.ask(request, PERMISSION_OPTIONS), ctx.cancel)
        except TurnCancelled:
            answer = None
        if answer is None or answer.outcome is PermissionOutcome.CANCELLED:
            breaker = BreakReason.USER_CANCELLED
            slot.result = ToolResult("Cancelled by the user while waiting for permission.", is_error=True)
            continue
        if answer.option_kind is PermissionOptionKind.ALLOW_ALWAYS:
            gate.remember(slot.tool.name, Remembered.ALLOW_ALWAYS)
        elif answer.option_kind is PermissionOptionKind.REJECT_ALWAYS:
            gate.remember(slot.tool.name, Remembered.REJECT_ALWAYS)
        if answer.allowed:
            slot.approved = True
            continue
        breaker = BreakReason.PERMISSION_REJECTED
        why = {
            PermissionOutcome.TIMEOUT: "timed out",
            PermissionOutcome.UNANSWERED: "could not be asked (no client could answer)",
        }.get(answer.outcome, "was rejected by the user")
        slot.result = ToolResult(f"Permission {why}; the call was not run.", is_error=True)
    return breaker
