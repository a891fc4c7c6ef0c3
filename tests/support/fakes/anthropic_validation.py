"""What the real Messages API refuses, for `FakeAnthropic` (strict mode) and tests.

Three layers: the official `anthropic` package's request types (`MessageCreateParamsStreaming`,
each content block against its own `*BlockParam` — the package's message union also admits
response models that accept anything, and its `Iterable` fields validate lazily, so both are
forced here — and unknown keys are refused, which the TypedDicts alone ignore); the rules
the types cannot express (alternation, tool ids, non-empty text); and the documented rules
of prompt caching and extended thinking (at most 4 `cache_control` marks, none on thinking
blocks; budget ≥ 1024 below `max_tokens`; the open tool loop's assistant messages start with
a thinking block; a thinking block's signature must be the one this fake issued for that text).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, get_args

import typing_extensions
from pydantic import TypeAdapter, ValidationError

__all__ = ["REDACTED_PREFIX", "sdk_problem", "sign", "validate_body"]

REDACTED_PREFIX = "EmwKAhgBEgy"  # what the fake's redacted_thinking data starts with
_REASONING = ("thinking", "redacted_thinking")


def sign(thinking: Any) -> str:
    """The fake's signature of a thinking text: sending back an edited text (or a made-up
    signature) fails like the real API's cryptographic check."""
    return "sig_" + hashlib.sha256(str(thinking).encode()).hexdigest()[:32]


def validate_body(body: Any) -> str | None:
    """The reason the real Messages API would answer 400, or None."""
    return _validate_shape(body) or sdk_problem(body) or _feature_rules(body)


# -- the official request types ----------------------------------------------------------------


@dataclass(frozen=True)
class _Types:
    request: TypeAdapter[Any]
    request_keys: frozenset[str]
    system_block: TypeAdapter[Any]
    tool: TypeAdapter[Any]
    blocks: dict[str, TypeAdapter[Any]]  # content block `type` → its *BlockParam


@functools.cache
def _types() -> _Types:
    # Imported on first use: the package takes seconds to import, most test modules never need it.
    from anthropic.types import TextBlockParam, ToolParam
    from anthropic.types.message_create_params import MessageCreateParamsStreaming
    from anthropic.types.user_message_param import UserMessageParam

    content = typing_extensions.get_type_hints(UserMessageParam)["content"]
    union = get_args(get_args(content)[1])[0]  # Union[str, Iterable[Union[...]]] → the block union
    blocks: dict[str, TypeAdapter[Any]] = {}
    for member in get_args(union):
        if typing_extensions.is_typeddict(member):  # the *Param request types, not response models
            [kind] = get_args(typing_extensions.get_type_hints(member)["type"])
            blocks[kind] = TypeAdapter(member)
    return _Types(
        TypeAdapter(MessageCreateParamsStreaming),
        frozenset(typing_extensions.get_type_hints(MessageCreateParamsStreaming)),
        TypeAdapter(TextBlockParam),
        TypeAdapter(ToolParam),
        blocks,
    )


def sdk_problem(body: Any) -> str | None:
    """Why `body` is not a valid `MessageCreateParamsStreaming`, or None."""
    types = _types()
    try:
        validated = types.request.validate_python(body)
    except ValidationError as exc:
        return _first_error(exc, "")
    if unknown := sorted(set(body) - types.request_keys):
        return f"{unknown[0]}: Extra inputs are not permitted"
    # Each block against its own type first, for a precise message...
    for i, message in enumerate(body["messages"]):
        if extra := sorted(set(message) - {"role", "content"}):
            return f"messages.{i}.{extra[0]}: Extra inputs are not permitted"
        if isinstance(message["content"], list):
            for j, block in enumerate(message["content"]):
                adapter = types.blocks.get(str(block.get("type"))) if isinstance(block, dict) else None
                if adapter is None:
                    return f"messages.{i}.content.{j}: not a known content block"
                if problem := _strict(adapter, block, f"messages.{i}.content.{j}"):
                    return problem
    for j, block in enumerate(body["system"] if isinstance(body.get("system"), list) else []):
        if problem := _strict(types.system_block, block, f"system.{j}"):
            return problem
    for j, tool in enumerate(body.get("tools") or []):
        if problem := _strict(types.tool, tool, f"tools.{j}"):
            return problem
    # ...then the whole request, its lazily validated iterables consumed.
    try:
        _materialize(validated)
    except ValidationError as exc:
        return _first_error(exc, "")
    return None


def _first_error(exc: ValidationError, where: str) -> str:
    error = exc.errors()[0]
    return f"{'.'.join([where, *(str(p) for p in error['loc'])]).lstrip('.')}: {error['msg']}"


def _strict(adapter: TypeAdapter[Any], value: Any, where: str) -> str | None:
    try:
        validated = _materialize(adapter.validate_python(value))
    except ValidationError as exc:
        return _first_error(exc, where)
    extra = _extra_keys(value, validated, where)
    return f"{extra}: Extra inputs are not permitted" if extra else None


def _materialize(value: Any) -> Any:
    """Validated output with every lazily validated `Iterable` consumed (which validates it)."""
    if isinstance(value, Mapping):
        return {k: _materialize(v) for k, v in value.items()}
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        return value
    return [_materialize(v) for v in value]


def _extra_keys(given: Any, validated: Any, where: str) -> str | None:
    """The first key of `given` that validation dropped (a TypedDict ignores unknown keys)."""
    if isinstance(given, dict) and isinstance(validated, dict):
        for key, value in given.items():
            if key not in validated:
                return f"{where}.{key}"
            if found := _extra_keys(value, validated[key], f"{where}.{key}"):
                return found
    elif isinstance(given, list) and isinstance(validated, list):
        for i, (a, b) in enumerate(zip(given, validated, strict=False)):
            if found := _extra_keys(a, b, f"{where}.{i}"):
                return found
    return None


# -- prompt caching and extended thinking --------------------------------------------------------


def _feature_rules(body: dict[str, Any]) -> str | None:
    blocks = [*(body.get("tools") or []), *(body["system"] if isinstance(body.get("system"), list) else [])]
    for message in body["messages"]:
        blocks += message["content"] if isinstance(message["content"], list) else []
    marked = [b for b in blocks if "cache_control" in b]
    if len(marked) > 4:
        return f"A maximum of 4 blocks with cache_control may be provided. Found {len(marked)}."
    if any(b.get("type") in _REASONING for b in marked):
        return "thinking blocks cannot be marked with cache_control"
    thinking = body.get("thinking")
    if not thinking or thinking.get("type") != "enabled":
        return None
    budget = thinking["budget_tokens"]
    if budget < 1024:
        return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
    if body["max_tokens"] <= budget:
        return "`max_tokens` must be greater than `thinking.budget_tokens`"
    if (body.get("tool_choice") or {}).get("type", "auto") not in ("auto", "none"):
        return "Thinking may not be enabled when tool_choice forces tool use."
    if "top_k" in body or body.get("temperature", 1) != 1:
        return "temperature and top_k may not be changed when thinking is enabled"
    return _open_loop_problem(body["messages"])


def _open_loop_problem(messages: list[dict[str, Any]]) -> str | None:
    i = len(messages) - 1
    while i >= 1 and any(b.get("type") == "tool_result" for b in _content(messages[i])):
        first = _content(messages[i - 1])[0]
        if first.get("type") not in _REASONING:
            return (
                f"messages.{i - 1}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                f"`{first.get('type')}`. When `thinking` is enabled, a final `assistant` message must "
                "start with a thinking block."
            )
        i -= 2
    return None


def _content(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _validate_shape(body: Any) -> str | None:
    """Alternation, tool ids, block contents: what the request types cannot express."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: Field required"
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        return "max_tokens: Field required"
    if "system" in body and not isinstance(body["system"], str | list):
        return "system: Input should be a valid string"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: Field required"
    previous_tool_ids: set[str] = set()
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        if i == 0 and message["role"] != "user":
            return 'messages: first message must use the "user" role'
        if i > 0 and message["role"] == messages[i - 1]["role"]:
            return 'messages: roles must alternate between "user" and "assistant"'
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list) or not content:
            return f"messages.{i}: all messages must have non-empty content"
        tool_ids: set[str] = set()
        seen_non_result = False
        for j, block in enumerate(content):
            problem = _validate_block(block, message["role"], previous_tool_ids)
            if problem:
                return f"messages.{i}.content.{j}: {problem}"
            if block["type"] == "tool_result" and seen_non_result:
                return f"messages.{i}.content.{j}: tool_result blocks must come first"
            seen_non_result = seen_non_result or block["type"] != "tool_result"
            if block["type"] == "tool_use":
                tool_ids.add(block["id"])
        previous_tool_ids = tool_ids
    for tool in body.get("tools") or []:
        if (
            not isinstance(tool, dict)
            or not tool.get("name")
            or not isinstance(tool.get("input_schema"), dict)
        ):
            return "tools: each tool needs name and input_schema"
    return None


def _validate_block(block: Any, role: str, previous_tool_ids: set[str]) -> str | None:
    if not isinstance(block, dict):
        return "content block must be an object"
    kind = block.get("type")
    if kind == "text":
        if not isinstance(block.get("text"), str) or not block["text"].strip():
            return "text content blocks must contain non-whitespace text"
    elif kind == "tool_use":
        if role != "assistant":
            return "tool_use blocks are only allowed in assistant messages"
        if not block.get("id") or not block.get("name") or not isinstance(block.get("input"), dict):
            return "tool_use: id, name and input (an object) are required"
    elif kind == "image":
        source = block.get("source")
        if role != "user":
            return "image blocks are only allowed in user messages"
        if not isinstance(source, dict) or source.get("type") != "base64" or not source.get("data"):
            return "image.source: a base64 source with data is required"
        if source.get("media_type") not in ("image/jpeg", "image/png", "image/gif", "image/webp"):
            return f"image.source.media_type: {source.get('media_type')!r} is not supported"
    elif kind == "thinking":
        if role != "assistant":
            return "thinking blocks are only allowed in assistant messages"
        if block.get("signature") != sign(block.get("thinking")):
            return "Invalid `signature` in `thinking` block"
    elif kind == "redacted_thinking":
        if role != "assistant" or not str(block.get("data", "")).startswith(REDACTED_PREFIX):
            return "Invalid `data` in `redacted_thinking` block"
    elif kind == "tool_result":
        if role != "user":
            return "tool_result blocks are only allowed in user messages"
        if block.get("tool_use_id") not in previous_tool_ids:
            return (
                f"tool_result: unexpected tool_use_id {block.get('tool_use_id')!r}: each tool_result "
                "must have a corresponding tool_use block in the previous message"
            )
        if block.get("is_error") and not block.get("content"):
            return "tool_result: content cannot be empty if `is_error` is true"
    else:
        return f"unsupported content block type {kind!r}"
    return None
