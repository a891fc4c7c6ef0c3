"""Classifying OpenAI-style errors (an HTTP status + body, or an error object inside the
stream) into `HarnessError`s, for the Chat Completions and the Responses providers alike."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from agentd.core import ErrorKind, HarnessError
from agentd.providers.http import parse_retry_after

# Wordings used by OpenAI, vLLM, llama.cpp, OpenRouter... for an over-long prompt.
_CONTEXT_OVERFLOW_RE = re.compile(
    r"context[ _-]?(length|window)|maximum context|prompt is too long|input is too long"
    r"|too many (input |prompt )?tokens",
    re.IGNORECASE,
)


def _error_fields(body: Any) -> tuple[str, str, str]:
    """(message, code, type) from the many error body shapes in the wild."""
    if isinstance(body, list) and body:  # Gemini's OpenAI layer wraps it in a list
        body = body[0]
    if isinstance(body, str):
        return body.strip(), "", ""
    if not isinstance(body, dict):
        return "", "", ""
    error = body.get("error", body)
    if isinstance(error, str):
        return error, str(body.get("code") or ""), str(body.get("type") or "")
    if not isinstance(error, dict):
        return str(error), "", ""
    message = error.get("message") or error.get("detail") or body.get("detail") or ""
    return str(message), str(error.get("code") or ""), str(error.get("type") or "")


def classify_http_error(status: int | None, body: Any, headers: Mapping[str, str]) -> HarnessError:
    """Map an HTTP error status + body to a `HarnessError`. `status=None`: an in-stream error."""
    message, code, err_type = _error_fields(body)
    if status is None and code.isdigit():
        status = int(code)  # OpenRouter puts the HTTP status in `error.code`
    tags = f"{code} {err_type}".lower()
    text = f"{message} {tags}".lower()
    detail = f"HTTP {status}" if status is not None else "error in stream"
    if code or err_type:
        detail += f" ({', '.join(x for x in (code, err_type) if x)})"
    full = f"{detail}: {message}" if message else detail
    retry_after = parse_retry_after(headers)

    def err(kind: ErrorKind, *, retry: float | None = None) -> HarnessError:
        return HarnessError(kind, full, status=status, retry_after=retry)

    if "insufficient_quota" in tags or "exceeded your current quota" in text:
        return err(ErrorKind.QUOTA)
    if "context_length_exceeded" in tags or (
        status in (None, 400, 413, 422) and _CONTEXT_OVERFLOW_RE.search(message)
    ):
        return err(ErrorKind.CONTEXT_OVERFLOW)
    if status == 429 or "rate_limit" in tags:
        return err(ErrorKind.RATE_LIMITED, retry=retry_after)
    if status == 401:
        return err(ErrorKind.AUTHENTICATION)
    if status == 402:  # OpenRouter: out of credits
        return err(ErrorKind.QUOTA)
    if status == 403:
        return err(ErrorKind.QUOTA if "quota" in text or "billing" in text else ErrorKind.AUTHENTICATION)
    if status == 404:
        return err(ErrorKind.PROVIDER_UNAVAILABLE)  # model or endpoint not served here
    if status == 408:
        return err(ErrorKind.TIMEOUT)
    if status == 413:
        # Payload too large, typically from a reverse proxy: shrinking the context fixes it.
        return err(ErrorKind.CONTEXT_OVERFLOW)
    if status is not None and 400 <= status < 500:
        return err(ErrorKind.INVALID_REQUEST)
    # 5xx, or an in-stream error without a usable status.
    return err(ErrorKind.PROVIDER_UNAVAILABLE, retry=retry_after)
