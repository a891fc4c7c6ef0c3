"""One sampling call: stream the provider's answer into events and an accumulator."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from server.loop.context import TurnContext
from server.loop.conversation import Message, ToolCall
from server.providers.base import (
    ProviderRequest,
    ReasoningDelta,
    Stop,
    StopReason,
    TextDelta,
    ToolCallComplete,
    ToolSpec,
    Usage,
)
from server.session.events import EventKind
from server.tools.registry import system_prompt_guidance


@dataclass
class Sample:
    """What one provider call produced so far (kept even if the call is cut off)."""

    message_id: str = field(default_factory=lambda: f"msg_{uuid.uuid4().hex[:16]}")
    thought_id: str = field(default_factory=lambda: f"thought_{uuid.uuid4().hex[:16]}")
    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage | None = None
    stop: StopReason | None = None


def build_request(ctx: TurnContext) -> ProviderRequest:
    system = "\n\n".join(
        part
        for part in (
            ctx.system_prompt,
            system_prompt_guidance(list(ctx.tools.values())),
            f"The workspace root is {ctx.cwd}. Paths are relative to it.",
        )
        if part
    )
    tools = [ToolSpec(t.name, t.description, t.parameters) for t in ctx.tools.values()]
    return ProviderRequest(model=ctx.model, system=system, messages=ctx.conversation.messages, tools=tools)


async def stream_sample(ctx: TurnContext, request: ProviderRequest, sample: Sample) -> None:
    async for ev in ctx.provider.stream(request):
        match ev:
            # `offset` lets a client that attached mid-message know it missed the start.
            case TextDelta(text=text) if text:
                offset = len(sample.text)
                sample.text += text
                ctx.events.emit_transient(
                    EventKind.AGENT_MESSAGE_CHUNK,
                    {"messageId": sample.message_id, "text": text, "offset": offset},
                )
            case ReasoningDelta(text=text) if text:
                offset = len(sample.reasoning)
                sample.reasoning += text
                ctx.events.emit_transient(
                    EventKind.AGENT_THOUGHT_CHUNK,
                    {"messageId": sample.thought_id, "text": text, "offset": offset},
                )
            case ToolCallComplete(id=call_id, name=name, arguments=arguments):
                sample.tool_calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
            case Usage():
                sample.usage = ev
            case Stop(reason=reason):
                sample.stop = reason


def commit_sample(ctx: TurnContext, sample: Sample) -> None:
    """Record the (possibly partial) assistant message: durable final-text events first,
    then the conversation entry the next request will carry."""
    if sample.reasoning:
        ctx.events.emit(EventKind.AGENT_THOUGHT, {"messageId": sample.thought_id, "text": sample.reasoning})
    if sample.text:
        ctx.events.emit(EventKind.AGENT_MESSAGE, {"messageId": sample.message_id, "text": sample.text})
    if sample.text or sample.reasoning or sample.tool_calls:
        ctx.conversation.append(
            Message(
                role="assistant",
                content=sample.text,
                reasoning=sample.reasoning,
                tool_calls=list(sample.tool_calls),
            )
        )
