"""Tool execution for one model step (R-T1, R-T3, R-T8).

Each call is announced with its arguments parsed and checked (tool_slot.py). Phase 1
(tool_approval.py) approves calls serially, in order. A permission rejection, a user cancel or an
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
import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentd.core import (
    Message,
    PlanUpdated,
    ToolCall,
    ToolCallAnnounced,
    ToolCallFinished,
    ToolCallProgress,
    ToolCallStarted,
    text_content,
    tracing,
)
from agentd.loop.context import TurnCancelled, TurnContext, run_cancellable
from agentd.loop.detection import CallRecord, NoProgress, shell_failed, with_no_progress_note
from agentd.loop.react.approval import BreakReason, approve
from agentd.loop.react.slot import Slot, parse_call
from agentd.tools import Access, ToolContext, ToolError, ToolResult

__all__ = ["BreakReason", "RoundResult", "execute_tool_round", "file_digests", "skip_tool_round"]

log = logging.getLogger(__name__)

PROGRESS_TAIL_CHARS = 4000


@dataclass(frozen=True)
class RoundResult:
    executed: int  # calls that actually ran
    break_reason: BreakReason | None
    succeeded: int = 0  # ran and returned a non-error result (productive calls)
    crashed: list[str] = field(default_factory=list)  # error texts of tools that raised
    records: list[CallRecord] = field(default_factory=list)  # every call, for the loop detector


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


def _emit(
    ctx: TurnContext, update: ToolCallAnnounced | ToolCallStarted | ToolCallFinished | PlanUpdated
) -> None:
    ctx.events.emit(update)


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
        ctx.events.emit_transient(update)

    async def content(blocks: list[dict[str, Any]]) -> None:
        update = ToolCallProgress(slot.call.id, blocks)
        ctx.events.emit_transient(update)
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
        ctx.conversation.append(
            Message.tool_result(slot.call, output, is_error=result.is_error, images=result.images)
        )


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
    if len(approved) == 1 and approved[0].tool is not None and approved[0].tool.access is not Access.WRITE:
        # One call that is no write: nothing to run beside it — no task group around it
        # (`run_cancellable` runs it in this task, cancelled by the turn's cancel).
        await _execute(ctx, approved[0])
    elif approved:
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
        records=await _records(ctx, slots, presets or {}),
    )


async def _records(ctx: TurnContext, slots: list[Slot], presets: dict[str, ToolResult]) -> list[CallRecord]:
    """What the loop detector needs to know about each call; a successful write also says
    what the files hold now (their digests, read in a worker thread: file churn is content
    going back and forth)."""
    records = []
    for slot in slots:
        result = slot.result
        assert result is not None
        writes: tuple[tuple[str, str], ...] = ()
        if (
            slot.approved
            and not result.is_error
            and slot.tool is not None
            and slot.tool.access is Access.WRITE
        ):
            writes = await asyncio.to_thread(file_digests, _write_paths(ctx, slot))
        records.append(_record(slot, result, presets, writes))
    return records


def _record(
    slot: Slot, result: ToolResult, presets: dict[str, ToolResult], writes: tuple[tuple[str, str], ...]
) -> CallRecord:
    malformed = slot.call.id not in presets and (slot.tool is None or slot.args is None)
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
