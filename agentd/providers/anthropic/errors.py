"""Anthropic error responses (HTTP status + error body, or an `error` event inside a 200
stream) → classified `HarnessError`s, so the loop decides on retries by `ErrorKind` alone."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from agentd.core import ErrorKind, HarnessError
from agentd.providers.http import parse_retry_after

# e.g. "prompt is too long: 208310 tokens > 200000 maximum",
# "input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000, ..."
_CONTEXT_OVERFLOW_RE = re.compile(
    r"prompt is too long|exceeds? (the )?context (limit|window)|context[ _-]?(length|window)"
    r"|maximum context|too many (input |prompt )?tokens",
    re.IGNORECASE,
)
# e.g. "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing..."
_QUOTA_RE = re.compile(r"credit balance|billing|purchase credits|quota", re.IGNORECASE)

# Anthropic's error types, for in-stream errors that come without an HTTP status.
_TYPE_STATUS: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def _error_fields(body: Any) -> tuple[str, str, str]:
    """(message, error type, request id) from `{"type": "error", "error": {...}}` or a stray body."""
    if isinstance(body, str):
        return body.strip(), "", ""
    if not isinstance(body, dict):
        return "", "", ""
    request_id = str(body.get("request_id") or "")
    error = body.get("error", body)
    if isinstance(error, str):
        return error, "", request_id
    if not isinstance(error, dict):
        return str(error), "", request_id
    return str(error.get("message") or ""), str(error.get("type") or ""), request_id


def classify_http_error(status: int | None, body: Any, headers: Mapping[str, str]) -> HarnessError:
    """Map an HTTP error status + Anthropic error body to a `HarnessError`.

    `status=None`: an `error` event inside a 200 stream, classified by its error type.
    """
    message, err_type, request_id = _error_fields(body)
    request_id = request_id or headers.get("request-id", "")
    effective = status if status is not None else _TYPE_STATUS.get(err_type)
    detail = f"HTTP {status}" if status is not None else "error in stream"
    if err_type:
        detail += f" ({err_type})"
    full = f"{detail}: {message}" if message else detail
    if request_id:
        full += f" [request-id {request_id}]"
    retry_after = parse_retry_after(headers)

    def err(kind: ErrorKind, *, retry: float | None = None) -> HarnessError:
        return HarnessError(kind, full, status=status, retry_after=retry)

    if effective == 402 or (effective in (None, 400, 403) and _QUOTA_RE.search(message)):
        return err(ErrorKind.QUOTA)
    if effective == 413 or (effective in (None, 400) and _CONTEXT_OVERFLOW_RE.search(message)):
        return err(ErrorKind.CONTEXT_OVERFLOW)
    if effective == 429:
        return err(ErrorKind.RATE_LIMITED, retry=retry_after)
    if effective in (401, 403):
        return err(ErrorKind.AUTHENTICATION)
    if effective == 404:
        return err(ErrorKind.PROVIDER_UNAVAILABLE)  # model or endpoint not served here
    if effective == 408:
        return err(ErrorKind.TIMEOUT)
    if effective is not None and 400 <= effective < 500:
        return err(ErrorKind.INVALID_REQUEST)
    # 500 api_error, 529 overloaded_error, other 5xx, or an unknown in-stream error.
    return err(ErrorKind.PROVIDER_UNAVAILABLE, retry=retry_after)
