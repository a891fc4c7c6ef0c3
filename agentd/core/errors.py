"""The closed set of error kinds (R-R1) and the exception that carries one.

Providers and tools raise `HarnessError`; the loop never inspects message strings,
only `kind`. Later issues add recovery hints and retry buckets keyed by `ErrorKind`.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorKind(StrEnum):
    RATE_LIMITED = "rate_limited"
    NETWORK = "network"
    TIMEOUT = "timeout"
    MCP_TIMEOUT = "mcp_timeout"
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    QUOTA = "quota"
    CONTEXT_OVERFLOW = "context_overflow"
    AUTHENTICATION = "authentication"
    INVALID_REQUEST = "invalid_request"
    CONTENT_FILTERED = "content_filtered"
    DELEGATE_DEPTH_EXCEEDED = "delegate_depth_exceeded"
    TOOL_EXECUTION = "tool_execution"
    MCP_SPAWN = "mcp_spawn"
    MCP_PROTOCOL = "mcp_protocol"
    INTERNAL = "internal"


class HarnessError(Exception):
    """A typed failure. `retry_after` (seconds) comes from the provider when it says so."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return f"HarnessError({self.kind.value!r}, {self.message!r}, status={self.status})"


class RecoveryHint(StrEnum):
    """How a kind of failure can be recovered from (R-R1); the retry buckets turn it into a decision."""

    BACKOFF_RETRY = "backoff_retry"  # transient: wait and try the same thing again
    SWITCH_PROVIDER = "switch_provider"  # the lane is sick, the task is not: next provider in the chain
    COMPACT_CONTEXT = "compact_context"  # the request no longer fits: shrink the context, then retry
    FAIL_FAST = "fail_fast"  # retrying cannot help (bad request, filtered); for tools: don't retry the call
    # 000: "认证重试有独立 schedule" — a rejected credential is retried on the same lane on a
    # schedule of its own (a key being rotated, a gateway blip), never on another lane.
    AUTH_SCHEDULE = "auth_schedule"
    BUG = "bug"  # our own fault: surface it, never loop on it


# Exhaustive on purpose: a new ErrorKind without a hint fails the test that walks the enum.
_HINTS: dict[ErrorKind, RecoveryHint] = {
    ErrorKind.RATE_LIMITED: RecoveryHint.BACKOFF_RETRY,
    ErrorKind.NETWORK: RecoveryHint.BACKOFF_RETRY,
    ErrorKind.TIMEOUT: RecoveryHint.BACKOFF_RETRY,
    ErrorKind.MCP_TIMEOUT: RecoveryHint.BACKOFF_RETRY,
    # Quota is a lane-level degradation, not a fatal error: a fallback lane may still have credit.
    ErrorKind.PROVIDER_UNAVAILABLE: RecoveryHint.SWITCH_PROVIDER,
    ErrorKind.QUOTA: RecoveryHint.SWITCH_PROVIDER,
    ErrorKind.CONTEXT_OVERFLOW: RecoveryHint.COMPACT_CONTEXT,
    # A bad key fails on every lane, so authentication never switches provider (003); it is
    # retried on its own schedule instead (000), which wins over the spec's fail_fast.
    ErrorKind.AUTHENTICATION: RecoveryHint.AUTH_SCHEDULE,
    ErrorKind.INVALID_REQUEST: RecoveryHint.FAIL_FAST,
    ErrorKind.CONTENT_FILTERED: RecoveryHint.FAIL_FAST,
    ErrorKind.DELEGATE_DEPTH_EXCEEDED: RecoveryHint.FAIL_FAST,
    # Tool-scoped: the error goes back to the model as a tool result; the call itself is not retried.
    ErrorKind.TOOL_EXECUTION: RecoveryHint.FAIL_FAST,
    ErrorKind.MCP_SPAWN: RecoveryHint.FAIL_FAST,
    ErrorKind.MCP_PROTOCOL: RecoveryHint.FAIL_FAST,
    ErrorKind.INTERNAL: RecoveryHint.BUG,
}


def hint(kind: ErrorKind | HarnessError) -> RecoveryHint:
    """The one recovery hint of an error kind (R-R1). Accepts the error itself for convenience."""
    if isinstance(kind, HarnessError):
        kind = kind.kind
    return _HINTS[kind]
