"""Request bodies checked against the official `openai` package's request types, so what the
providers send is what the real API accepts (field names, nesting, literal values)."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

import pydantic
from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming
from openai.types.responses.response_create_params import ResponseCreateParamsStreaming


@functools.cache
def _chat_adapter() -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(CompletionCreateParamsStreaming)


@functools.cache
def _responses_adapter() -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(ResponseCreateParamsStreaming)


def _consume(value: Any) -> None:
    """Pydantic validates `Iterable[...]` fields lazily (a ValidatorIterator): walk the
    result so every nested item is validated too — otherwise a bad message passes."""
    if isinstance(value, Mapping):
        for item in value.values():
            _consume(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _consume(item)
    elif isinstance(value, Iterator):
        for item in value:
            _consume(item)


def _check(adapter: pydantic.TypeAdapter[Any], body: Any) -> str | None:
    try:
        _consume(adapter.validate_python(body, strict=True))
    except pydantic.ValidationError as exc:
        return str(exc)
    return None


def chat_body_error(body: Any) -> str | None:
    """Why `body` is not a valid streaming Chat Completions request, or None."""
    return _check(_chat_adapter(), body)


def responses_body_error(body: Any) -> str | None:
    """Why `body` is not a valid streaming Responses API request, or None."""
    return _check(_responses_adapter(), body)
