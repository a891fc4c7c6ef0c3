"""One sampling call: stream the provider's answer into events and an accumulator."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from agentd.core import (
    AgentText,
    AgentTextChunk,
    ErrorKind,
    HarnessError,
    Message,
    ProviderRequest,
    ReasoningBlock,
    ReasoningBlockComplete,
    ReasoningDelta,
    Stop,
    StopReason,
    TextDelta,
    ToolCall,
    ToolCallComplete,
    ToolCallIds,
    ToolSpec,
    Usage,
    hold_writes,
    one_per_batch,
    random_hex,
    release_writes,
    tracing,
)
from agentd.loop.context import TurnContext
from agentd.loop.detection import RepetitionHit, detect_repetitive_text
from agentd.loop.reminders import system_reminder
from agentd.loop.request_memo import RequestMemo
from agentd.loop.structured import SHIM_REMINDER
from agentd.tools import Tool, system_prompt_guidance


@dataclass
class Sample:
    """What one provider call produced so far (kept even if the call is cut off)."""

    # 16 random hex digits, as `uuid4().hex[:16]` spelled them (its Python-level `UUID` object
    # and `hex` property cost three calls per id); unique, not secret: one C call and no
    # system call per id (agentd/core/ids.py).
    message_id: str = field(default_factory=lambda: f"msg_{random_hex(8)}")
    thought_id: str = field(default_factory=lambda: f"thought_{random_hex(8)}")
    text: str = ""
    reasoning: str = ""
    reasoning_blocks: list[ReasoningBlock] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage | None = None
    stop: StopReason | None = None
    degenerate: RepetitionHit | None = None  # the stream was cut as repetitive text


def build_request(
    ctx: TurnContext,
    messages: list[Message] | None = None,
    *,
    force_schema: bool = True,
    offer_shim: bool = False,
) -> ProviderRequest:
    """`force_schema=False` leaves a structured-output schema off (recovery rounds);
    `offer_shim` still offers the StructuredOutput tool, unforced (the recovery of a
    StructuredOutput completion requirement must be able to call it)."""
    memo = ctx.conversation.memo
    if isinstance(memo, RequestMemo):
        system, specs = memo.system_and_tools(ctx.system_prompt, ctx.cwd, ctx.tools, request_parts)
    else:
        system, specs = request_parts(ctx.system_prompt, ctx.cwd, ctx.tools)
    tools = list(specs)  # (the request's own: the shim's tool may be appended)
    if messages is None:
        messages = ctx.conversation.messages
    native_schema = None
    schema = ctx.output_schema if force_schema or offer_shim else None
    if schema is not None:
        if force_schema and uses_native_schema(ctx):
            native_schema = schema.schema
        else:
            tools.append(schema.tool_spec())
            messages = with_shim_reminder(messages)
    return ProviderRequest(
        model=ctx.model,
        system=system,
        messages=messages,
        tools=tools,
        output_schema=native_schema,
        session_id=ctx.session_id,
    )


def request_parts(system_prompt: str, cwd: object, tools: Mapping[str, Tool]) -> tuple[str, list[ToolSpec]]:
    """A request's system prompt (the agent's, the tools' guidance, the workspace) and tools."""
    # The non-empty parts, joined (a list, not a generator: one call less per request).
    parts = [system_prompt] if system_prompt else []
    if guidance := system_prompt_guidance(tools):
        parts.append(guidance)
    parts.append(f"The workspace root is {cwd}. Paths are relative to it.")
    return "\n\n".join(parts), [ToolSpec(t.name, t.description, t.parameters) for t in tools.values()]


def with_shim_reminder(messages: list[Message]) -> list[Message]:
    """The request's messages with the StructuredOutput reminder as `<system-reminder>` text in
    the last user message (001: "<system-reminder> 标签会作为某条 user content 里的文本"; "注入
    reminder，要求模型最后用 StructuredOutput 工具交答案"), not in the system prompt. Only the
    request carries it: the stored conversation is what happened."""
    reminder = system_reminder(SHIM_REMINDER)
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            updated = messages[i].model_copy(update={"content": f"{messages[i].content}\n\n{reminder}"})
            return [*messages[:i], updated, *messages[i + 1 :]]
    return [*messages, Message.user(reminder)]


def uses_native_schema(ctx: TurnContext) -> bool:
    schema = ctx.output_schema
    return schema is not None and schema.error is None and ctx.provider.supports_native_schema


# The provider's events a network read at a time when it can (`StreamBatches`); False: one
# by one from `stream`, the general path any provider has (kept switchable and tested).
BATCHED = True


# `AGENTD_SAMPLING_DEADLINE=asyncio`: the call's maximum is an `asyncio.timeout` (the library
# path); by default one `call_later` handle that cancels the sampling's task (~8 calls less).
LIBRARY_DEADLINE = os.environ.get("AGENTD_SAMPLING_DEADLINE", "").strip().lower() == "asyncio"


def _timed_out(call_max: float) -> HarnessError:
    return HarnessError(ErrorKind.TIMEOUT, f"the model call ran past its maximum of {call_max:g}s")


def _expire(task: asyncio.Task[Any], expired: list[bool]) -> None:
    expired.append(True)
    task.cancel()


async def stream_sample(
    ctx: TurnContext, request: ProviderRequest, sample: Sample, *, timed: bool = False
) -> None:
    """Stream the provider's answer into `sample` and the turn's transient events, within the
    call's maximum (`timed`: the caller holds that deadline already, the library path)."""
    call_max = ctx.limits.retry.call_max_s
    task = None
    if not timed:
        if call_max <= 0 or LIBRARY_DEADLINE:
            await _within_timeout(ctx, request, sample, call_max)
            return
        # 003: "LLM call max 1200s" — past it the call is a timeout (the `timeout` bucket).
        # What `asyncio.timeout` does, without its context manager's calls: the handle cancels
        # this task, and that cancel (told apart from any other by the task's count of cancel
        # requests) is taken back and raised as the timeout.
        task = asyncio.current_task()
    if task is not None:
        base = task.cancelling()
        expired: list[bool] = []
        handle = asyncio.get_running_loop().call_later(call_max, _expire, task, expired)
    limits = ctx.limits.stationarity
    attributes = {"agentd.session_id": ctx.session_id, "agentd.turn_id": ctx.turn_id}
    if tracing.enabled():
        attributes |= request_attributes(ctx.provider.name, request.model)
    with tracing.span("agentd.sampling", attributes) as span:
        try:
            # The answer in batches (`stream_batches`, else `stream`'s events one by one).
            batches = getattr(ctx.provider, "stream_batches", None) if BATCHED else None
            if batches is None:
                batches = partial(one_per_batch, ctx.provider.stream)
            stream = batches(request)
            emit, used = ctx.events.emit_transient, ctx.used_tool_call_ids
            text_len = len(sample.text)  # kept here: one `len` per chunk, not two
            try:  # (closed as `contextlib.aclosing` would, without its three calls)
                # A network read's events per resume; one `match` per event, here in the loop
                # (no call per event).
                async for batch in stream:
                    # One read's deltas: a connection's direct write once, after them all
                    # (agentd/core/cork.py; nothing awaits in between).
                    hold_writes()
                    try:
                        for ev in batch:
                            match ev:
                                # `offset`: a client that attached mid-message knows it missed the start.
                                case TextDelta(text=text) if text:
                                    offset = text_len
                                    text_len += len(text)
                                    sample.text += text
                                    emit(AgentTextChunk(sample.message_id, text, offset))
                                    # The stream so far is `sample.text`: judged whole once it is long
                                    # enough (no detector to feed chunk by chunk before that).
                                    if text_len > limits.min_stream_chars:
                                        sample.degenerate = detect_repetitive_text(sample.text, limits)
                                        if sample.degenerate is not None:
                                            break
                                case ReasoningDelta(text=text) if text:
                                    offset = len(sample.reasoning)
                                    sample.reasoning += text
                                    emit(AgentTextChunk(sample.thought_id, text, offset, thought=True))
                                case ReasoningBlockComplete(block=block):
                                    sample.reasoning_blocks.append(block)
                                case ToolCallComplete(id=call_id, name=name, arguments=arguments):
                                    call_id = unique_tool_call_id(call_id, used, sample.tool_calls)
                                    call = ToolCall(id=call_id, name=name, arguments=arguments)
                                    sample.tool_calls.append(call)
                                case Usage():
                                    sample.usage = ev
                                case Stop(reason=reason):
                                    sample.stop = reason
                        else:
                            continue
                    finally:
                        release_writes()
                    # A degenerate stream: stop reading it (closing it). `break`, not
                    # `return`: the deadline's handle below must still be cancelled.
                    break
            finally:
                await stream.aclose()  # type: ignore[union-attr]
        except BaseException as exc:
            if task is not None:
                handle.cancel()
                if expired and task.uncancel() <= base and isinstance(exc, asyncio.CancelledError):
                    raise _timed_out(call_max) from exc
            raise
        finally:
            if span is not None:  # what came back, even from a call cut off
                span.set_attributes(response_attributes(sample))
    if task is not None:
        handle.cancel()
        if expired:  # it ended all the same (the cancel came too late to matter)
            task.uncancel()


async def _within_timeout(
    ctx: TurnContext, request: ProviderRequest, sample: Sample, call_max: float
) -> None:
    """`stream_sample` within `asyncio.timeout` (the library path, and a call with no maximum)."""
    deadline = asyncio.timeout(call_max if call_max > 0 else None)
    try:
        async with deadline:
            await stream_sample(ctx, request, sample, timed=True)
    except TimeoutError as exc:
        if not deadline.expired():
            raise
        raise _timed_out(call_max) from exc


def request_attributes(provider: str, model: str) -> dict[str, str]:
    """OpenTelemetry GenAI semantic-convention attributes of a sampling call's request."""
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": provider,  # the older name of gen_ai.provider.name; backends read either
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
    }


def response_attributes(sample: Sample) -> dict[str, str | int | list[str]]:
    """What the response reported: model, tokens (cache reads and writes apart) and why it stopped."""
    out: dict[str, str | int | list[str]] = {}
    if (usage := sample.usage) is not None:
        out |= {
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens,
            "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens,
        }
        if usage.model:
            out["gen_ai.response.model"] = usage.model
    if sample.stop is not None:
        out["gen_ai.response.finish_reasons"] = [sample.stop.value]
    return out


def unique_tool_call_id(call_id: str, used: set[str], pending: list[ToolCall]) -> str:
    """The provider's id, or — if the session already used it — the id with a suffix.
    The conversation carries the new id both ways, so the provider sees a consistent
    history; clients never see two different calls under one toolCallId."""
    # No union of the sets: `used` holds every id of the session, and copying it per call
    # made a tool call's cost grow with the history.
    pending_ids = {c.id for c in pending}

    def taken(candidate: str) -> bool:
        return candidate in used or candidate in pending_ids

    if not taken(call_id):
        return call_id
    # The session's set knows where its run of taken suffixes ends (`ToolCallIds`): a
    # provider that reuses one id every step would otherwise walk them all, every call.
    n = used.first_free_suffix(call_id) if isinstance(used, ToolCallIds) else 2
    while taken(f"{call_id}_{n}"):
        n += 1
    return f"{call_id}_{n}"


def commit_sample(ctx: TurnContext, sample: Sample, *, discarded: bool = False) -> None:
    """Record the (possibly partial) assistant message: durable final-text events first,
    then the conversation entry the next request will carry. A `discarded` attempt (the
    provider failed mid-stream and the call is retried) keeps its events — clients saw
    the text — but stays out of the conversation; its text was cut off, so it is marked
    interrupted like any message that stopped mid-stream (R-E1)."""
    # Each built only when it has text to emit (a turn without reasoning built its thought
    # for nothing).
    if sample.reasoning:
        ctx.events.emit(
            AgentText(
                sample.thought_id, sample.reasoning, thought=True, discarded=discarded, interrupted=discarded
            )
        )
    if sample.text:
        ctx.events.emit(AgentText(sample.message_id, sample.text, discarded=discarded, interrupted=discarded))
    if discarded:
        return
    if sample.text or sample.reasoning or sample.reasoning_blocks or sample.tool_calls:
        ctx.conversation.append(
            Message(
                role="assistant",
                content=sample.text,
                reasoning=sample.reasoning,
                reasoning_blocks=list(sample.reasoning_blocks),
                tool_calls=list(sample.tool_calls),
            )
        )
