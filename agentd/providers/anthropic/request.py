"""`ProviderRequest` → the Anthropic Messages API request body: the system prompt, tools,
messages, prompt-caching breakpoints and extended thinking.

Prompt caching: the API caches the prefix up to each `cache_control` breakpoint (order:
tools, system, messages) and allows at most four. We mark the last tool, the system
prompt, the last block of the conversation (so the next call reads this one's prefix) and
the last block of the previous user turn (where the previous call put its tail mark, so its
cache entry is read even when the new tail is far from it).

Extended thinking (`thinking: {"type": "enabled", "budget_tokens": N}`): `max_tokens` must
exceed the budget, so a cap at or below it becomes cap + budget (the cap keeps meaning "room
for the answer"). We never send `tool_choice`, `temperature` or `top_k`, which thinking
restricts. Signed thinking blocks come back first in their assistant message, verbatim. A
tool-use loop must run in one thinking mode: when the open loop has an assistant message
without thinking (written while thinking was off, or by another provider), this call goes
without thinking rather than be refused; thinking resumes with the next user turn.
Adaptive thinking (`{"type": "adaptive"}`, the only kind newer models take) lets the model
decide how much to think; it has no budget and leaves `max_tokens` alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentd.core import ProviderRequest
from agentd.providers.anthropic.messages import REASONING_TYPES, translate_messages

# The API refuses a request with more breakpoints than this.
MAX_CACHE_BREAKPOINTS = 4
# The smallest `budget_tokens` the API accepts.
MIN_THINKING_BUDGET = 1024


def _ephemeral() -> dict[str, str]:
    return {"type": "ephemeral"}


@dataclass(frozen=True)
class AnthropicOptions:
    """Per-provider request settings (from `AGENTD_ANTHROPIC_*`)."""

    model: str
    max_tokens: int = 8192
    prompt_cache: bool = True
    thinking_budget: int = 0  # tokens; 0 = no extended thinking
    adaptive_thinking: bool = False  # {"type": "adaptive"}; takes precedence over the budget

    def __post_init__(self) -> None:
        if self.thinking_budget and self.thinking_budget < MIN_THINKING_BUDGET:
            raise ValueError(f"thinking budget must be 0 (off) or at least {MIN_THINKING_BUDGET} tokens")


def wants_thinking(request: ProviderRequest, options: AnthropicOptions) -> bool:
    return request.extended_reasoning and (options.adaptive_thinking or options.thinking_budget > 0)


def build_body(request: ProviderRequest, options: AnthropicOptions) -> dict[str, Any]:
    """The JSON body for one streamed `POST /v1/messages`."""
    # Anthropic has no system role inside `messages`: system messages join the prompt.
    system_parts = [request.system] if request.system else []
    system_parts += [m.content for m in request.messages if m.role == "system" and m.content]
    thinks = wants_thinking(request, options)
    messages = translate_messages(request.messages, with_reasoning=thinks)
    if thinks and not loop_thinks(messages):
        thinks = False
        messages = translate_messages(request.messages, with_reasoning=False)
    body = compose_body(request, options, messages, system_parts, thinks)
    if options.prompt_cache:
        place_cache_breakpoints(body)
    return body


def compose_body(
    request: ProviderRequest,
    options: AnthropicOptions,
    messages: list[dict[str, Any]],
    system_parts: list[str],
    thinks: bool,
) -> dict[str, Any]:
    """The body around its `messages` (no cache marks yet); `anthropic_wire` shares it."""
    budget = options.thinking_budget if thinks and not options.adaptive_thinking else 0
    cap = request.max_output_tokens or options.max_tokens
    body: dict[str, Any] = {
        "model": request.model or options.model,
        "max_tokens": cap if not budget or cap > budget else cap + budget,
        "messages": messages,
        "stream": True,
    }
    if thinks:
        enabled = {"type": "enabled", "budget_tokens": budget}
        body["thinking"] = {"type": "adaptive"} if options.adaptive_thinking else enabled
    if system_parts:
        system = "\n\n".join(system_parts)
        body["system"] = [{"type": "text", "text": system}] if options.prompt_cache else system
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
    # `output_schema` is ignored (supports_native_schema = False): the loop's
    # StructuredOutput tool shim handles it.
    return body


def mark_cached(block: dict[str, Any]) -> dict[str, Any]:
    block["cache_control"] = _ephemeral()
    return block


def place_cache_breakpoints(body: dict[str, Any]) -> None:
    """Mark, in order of value, the conversation's tail, the tools, the system prompt and
    the previous user turn — at most `MAX_CACHE_BREAKPOINTS` marks."""
    targets: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = body["messages"]
    if messages and (tail := last_cacheable(messages[-1])) is not None:
        targets.append(tail)
    if body.get("tools"):
        targets.append(body["tools"][-1])
    if isinstance(body.get("system"), list) and body["system"]:
        targets.append(body["system"][-1])
    users = [m for m in messages if m["role"] == "user"]
    previous = users[-2] if messages and messages[-1]["role"] == "user" and len(users) > 1 else None
    if previous is not None and (block := last_cacheable(previous)) is not None:
        targets.append(block)
    for target in targets[:MAX_CACHE_BREAKPOINTS]:
        mark_cached(target)


def count_cache_breakpoints(body: dict[str, Any]) -> int:
    """How many `cache_control` marks `body` carries (for tests and debugging)."""
    blocks: list[Any] = list(body.get("tools") or [])
    if isinstance(body.get("system"), list):
        blocks += body["system"]
    for message in body.get("messages") or []:
        if isinstance(message.get("content"), list):
            blocks += message["content"]
    return sum(1 for block in blocks if isinstance(block, dict) and "cache_control" in block)


def last_cacheable(message: dict[str, Any]) -> dict[str, Any] | None:
    # Thinking blocks cannot carry cache_control themselves (they are cached as part of the prefix).
    for block in reversed(message["content"]):
        if block.get("type") not in REASONING_TYPES:
            return block  # type: ignore[no-any-return]
    return None


def _starts_with_reasoning(message: dict[str, Any]) -> bool:
    content = message["content"]
    return bool(content) and content[0].get("type") in REASONING_TYPES


def _has_tool_result(message: dict[str, Any]) -> bool:
    return any(block.get("type") == "tool_result" for block in message["content"])


def loop_thinks(messages: list[dict[str, Any]]) -> bool:
    """Whether every assistant message of the open tool-use loop (the trailing run of
    assistant messages each answered by tool results) starts with a thinking block."""
    i = len(messages) - 1
    while i >= 1 and messages[i]["role"] == "user" and _has_tool_result(messages[i]):
        if messages[i - 1]["role"] != "assistant" or not _starts_with_reasoning(messages[i - 1]):
            return False
        i -= 2
    return True
