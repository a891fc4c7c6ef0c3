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
