"""Tool execution for one model step (R-T1, R-T3, R-T8).

Phase 1 approves calls serially, in order. A permission rejection, a user cancel or an
interjection (new user input) is a circuit breaker: later calls are not run and say why,
calls approved before it still run, and the turn then ends `Cancelled` — failures of the
user's will stop the work, while environment failures (a hook denial, a tool error) are
fed back to the model. Phase 2 runs the approved calls
concurrently; results are written back by original index so the conversation order
never depends on which call finished first. A tool that raises becomes an error result.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    import jsonschema

from server.core import tracing
from server.core.conversation import Message, ToolCall
from server.core.permission import PermissionOptionKind, PermissionOutcome
from server.core.updates import (
    PlanUpdated,
    ToolCallAnnounced,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
    text_content,
)
from server.loop.context import TurnCancelled, TurnContext, run_cancellable
from server.loop.detection import NoProgress, with_no_progress_note
from server.loop.loop_detector import CallRecord, shell_failed
from server.loop.outcome import EndReason
from server.tools.base import Access, Tool, ToolContext, ToolError, ToolResult
from server.tools.hooks import HookDecision
from server.tools.permissions import (
    PERMISSION_OPTIONS,
    Decision,
    Remembered,
    decide,
    plan_gate_refuses,
    plan_mode_refuses,
)

log = logging.getLogger(__name__)

PROGRESS_TAIL_CHARS = 4000


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


@dataclass
class Slot:
    call: ToolCall
    tool: Tool | None = None
    args: dict[str, Any] | None = None
    approved: bool = False
    result: ToolResult | None = None
    crashed: bool = False


@dataclass(frozen=True)
class RoundResult:
    executed: int  # calls that actually ran
    break_reason: BreakReason | None
    succeeded: int = 0  # ran and returned a non-error result (productive calls)
    crashed: list[str] = field(default_factory=list)  # error texts of tools that raised
    records: list[CallRecord] = field(default_factory=list)  # every call, for the loop detector


def parse_call(ctx: TurnContext, slot: Slot) -> None:
    """Resolve the tool and arguments; a problem becomes the call's (error) result."""
    tool = ctx.tools.get(slot.call.name)
    if tool is None:
        known = ", ".join(sorted(ctx.tools))
        slot.result = ToolResult(f"Unknown tool {slot.call.name!r}. Available tools: {known}.", is_error=True)
        return
    slot.tool = tool
    try:
        args = json.loads(slot.call.arguments or "{}")
    except json.JSONDecodeError as exc:
        slot.result = ToolResult(f"Arguments are not valid JSON ({exc.msg} at {exc.pos}).", is_error=True)
        return
    if not isinstance(args, dict):
        slot.result = ToolResult("Arguments must be a JSON object.", is_error=True)
        return
    error = argument_error(args, tool.parameters)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "arguments"
        slot.result = ToolResult(
            f"Invalid arguments for {tool.name} ({where}): {error.message}", is_error=True
        )
        return
    slot.args = args


def argument_error(args: dict[str, Any], schema: dict[str, Any]) -> jsonschema.ValidationError | None:
    """The error `jsonschema.validate(args, schema)` would raise (its best match), or None.
    `validate` checks the schema against its metaschema and builds a validator on every
    call — ~2 ms per tool call; the checked validator is kept per schema instead (keyed by
    its JSON text, so a tool whose schema changes gets a new one). An invalid schema still
    raises `SchemaError`, every time."""
    import jsonschema  # loaded at the first tool call, not at start-up (idle memory)

    try:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not JSON-serialisable (no tool's schema is): the uncached way
        try:
            jsonschema.validate(args, schema)
        except jsonschema.ValidationError as exc:
            return exc
        return None
    error: jsonschema.ValidationError | None = jsonschema.exceptions.best_match(
        _validator(key).iter_errors(args)
    )
    return error


@functools.lru_cache(maxsize=256)
def _validator(schema_json: bytes) -> Any:
    import jsonschema

    schema = orjson.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _announcement(ctx: TurnContext, slot: Slot) -> ToolCallAnnounced:
    raw: Any = slot.args
    if raw is None:
        try:
            raw = json.loads(slot.call.arguments or "{}")
        except json.JSONDecodeError:
            raw = {"arguments": slot.call.arguments}
    title, kind, locations = slot.call.name, "other", []
    if slot.tool is not None:
        kind = slot.tool.kind.value
        if slot.args is not None:
            title = slot.tool.title(slot.args)
            tool_ctx = ToolContext(cwd=ctx.cwd, session_id=ctx.session_id)
            try:
                locations = slot.tool.locations(slot.args, tool_ctx)
            except ToolError:
                locations = []
    return ToolCallAnnounced(slot.call.id, title, kind, raw, locations)


def _final_update(slot: Slot) -> ToolCallFinished:
    result = slot.result
    assert result is not None
    return ToolCallFinished(
        slot.call.id,
        failed=result.is_error,
        content=[*result.content, text_content(result.output)],
        raw_output=result.raw_output if result.raw_output is not None else {"output": result.output},
        locations=result.locations or (),
    )


async def _pre_tool_hooks(ctx: TurnContext, slot: Slot) -> ToolResult | None:
    assert slot.tool is not None
    payload = {
        "event": "pre_tool",
        "sessionId": ctx.session_id,
        "cwd": str(ctx.cwd),
        "tool": slot.tool.name,
        "input": slot.args,
    }
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
        denial = await _pre_tool_hooks(ctx, slot)
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
        why = "timed out" if answer.outcome is PermissionOutcome.TIMEOUT else "was rejected by the user"
        slot.result = ToolResult(f"Permission {why}; the call was not run.", is_error=True)
    return breaker


def _emit(
    ctx: TurnContext, update: ToolCallAnnounced | ToolCallStarted | ToolCallFinished | PlanUpdated
) -> None:
    ctx.events.emit(update.kind, update.payload())


def _write_paths(ctx: TurnContext, slot: Slot) -> list[str]:
    """The paths a write call touches, sorted so two calls never lock in opposite order."""
    assert slot.tool is not None and slot.args is not None
    try:
        locations = slot.tool.locations(slot.args, ToolContext(cwd=ctx.cwd, session_id=ctx.session_id))
    except ToolError:
        return []
    return sorted({str(loc["path"]) for loc in locations if "path" in loc})


async def _execute(ctx: TurnContext, slot: Slot) -> None:
    assert slot.tool is not None and slot.args is not None
    _emit(ctx, ToolCallStarted(slot.call.id))

    async def progress(output_so_far: str) -> None:
        # Tools report everything so far (an ACP update replaces the shown content).
        update = ToolCallProgress.text(slot.call.id, output_so_far[-PROGRESS_TAIL_CHARS:])
        ctx.events.emit_transient(update.kind, update.payload())

    async def content(blocks: list[dict[str, Any]]) -> None:
        update = ToolCallProgress(slot.call.id, blocks)
        ctx.events.emit_transient(update.kind, update.payload())
        await ctx.events.flushed()  # in the clients' queues before the tool goes on

    tool_ctx = ToolContext(
        cwd=ctx.cwd,
        session_id=ctx.session_id,
        report_progress=progress,
        report_content=content,
        interrupted=ctx.interrupted,
        background=ctx.background,
        todos=ctx.todos,
        client=ctx.client,
        agents=ctx.subagents,
        tool_call_id=slot.call.id,
    )
    attributes = {
        "agentd.session_id": ctx.session_id,
        "agentd.turn_id": ctx.turn_id,
        "agentd.tool": slot.call.name,
        "agentd.tool_call_id": slot.call.id,
    }
    with tracing.span("agentd.tool_call", attributes):
        await _run_tool(ctx, slot, tool_ctx)


async def _run_tool(ctx: TurnContext, slot: Slot, tool_ctx: ToolContext) -> None:
    assert slot.tool is not None and slot.args is not None
    try:
        if slot.tool.access is Access.WRITE:
            async with contextlib.AsyncExitStack() as stack:
                paths = _write_paths(ctx, slot)
                for path in paths:
                    await stack.enter_async_context(ctx.path_locks.setdefault(path, asyncio.Lock()))
                if ctx.before_write is not None:  # snapshots before edits (R-T12)
                    await ctx.before_write(paths)
                # File edits are short and run in a worker thread that a cancel cannot
                # stop; let them finish so the result tells the model what really happened.
                slot.result = await slot.tool.run(slot.args, tool_ctx)
        else:
            slot.result = await run_cancellable(slot.tool.run(slot.args, tool_ctx), ctx.cancel)
    except TurnCancelled:
        slot.result = ToolResult("Cancelled by the user before it finished.", is_error=True)
    except ToolError as exc:
        slot.result = ToolResult(str(exc), is_error=True)
    except Exception as exc:  # R-T3: a crashing tool is a readable result, not a crashed loop
        log.exception("tool %s crashed", slot.call.name)
        slot.result = ToolResult(f"{slot.call.name} failed: {type(exc).__name__}: {exc}", is_error=True)
        slot.crashed = True


def _announce(
    ctx: TurnContext, calls: list[ToolCall], presets: dict[str, ToolResult] | None = None
) -> tuple[list[Slot], list[ToolCallAnnounced]]:
    slots = [Slot(call) for call in calls]
    announced = []
    for slot in slots:
        if presets and slot.call.id in presets:
            slot.result = presets[slot.call.id]  # decided by the loop (e.g. StructuredOutput)
        else:
            parse_call(ctx, slot)
        announcement = _announcement(ctx, slot)
        announced.append(announcement)
        _emit(ctx, announcement)
    return slots, announced


def _write_back(ctx: TurnContext, slots: list[Slot], no_progress: NoProgress | None = None) -> None:
    for slot in slots:  # original order, whatever order they finished in
        result = slot.result
        assert result is not None
        if result.plan is not None:
            _emit(ctx, PlanUpdated(result.plan))
        output = result.output
        if no_progress is not None and slot.approved and no_progress.observe(slot.call, output):
            output = with_no_progress_note(output)
        _emit(ctx, _final_update(slot))
        ctx.conversation.append(Message.tool_result(slot.call, output, is_error=result.is_error))


def skip_tool_round(ctx: TurnContext, calls: list[ToolCall], why: str) -> None:
    """Announce the calls and close each with `why` without running any (a final stop)."""
    slots, _ = _announce(ctx, calls)
    for slot in slots:
        slot.result = ToolResult(why, is_error=True)
    _write_back(ctx, slots)


async def execute_tool_round(
    ctx: TurnContext,
    calls: list[ToolCall],
    *,
    no_progress: NoProgress | None = None,
    presets: dict[str, ToolResult] | None = None,
) -> RoundResult:
    """Run one step's calls. `presets` are results the loop already decided; those calls
    are announced and written back in order but never run."""
    slots, announced = _announce(ctx, calls, presets)

    breaker = await approve(ctx, slots, announced)

    approved = [s for s in slots if s.approved]
    if approved:
        async with asyncio.TaskGroup() as tg:
            for slot in approved:
                tg.create_task(_execute(ctx, slot))
    if ctx.cancel.is_set() and breaker is None:
        breaker = BreakReason.USER_CANCELLED

    _write_back(ctx, slots, no_progress)
    for slot in approved:
        ctx.called_tools.add(slot.call.name)
    return RoundResult(
        executed=len(approved),
        break_reason=breaker,
        succeeded=sum(1 for s in approved if s.result is not None and not s.result.is_error),
        crashed=[s.result.output for s in approved if s.crashed and s.result is not None],
        records=[await _record(ctx, slot, presets or {}) for slot in slots],
    )


async def _record(ctx: TurnContext, slot: Slot, presets: dict[str, ToolResult]) -> CallRecord:
    """What the loop detector needs to know about one call; a successful write also says
    what the files hold now (their digests: file churn is content going back and forth)."""
    result = slot.result
    assert result is not None
    malformed = slot.call.id not in presets and (slot.tool is None or slot.args is None)
    writes: tuple[tuple[str, str], ...] = ()
    if slot.approved and not result.is_error and slot.tool is not None and slot.tool.access is Access.WRITE:
        writes = await asyncio.to_thread(file_digests, _write_paths(ctx, slot))
    return CallRecord(
        slot.call.name,
        malformed=malformed,
        ran=slot.approved,
        failed=shell_failed(result.is_error, result.raw_output),
        output=result.output,
        writes=writes,
    )


def file_digests(paths: list[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for path in paths:
        try:
            digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            digest = "absent"  # deleted (or unreadable): a state of its own
        out.append((path, digest))
    return tuple(out)
