"""The session layer's errors as JSON-RPC errors: the one place that knows which wire code
each `SessionErrorKind` gets (docs/protocol.md). Used by the `Dispatcher` and by the
transports that answer outside it (SSE)."""

from __future__ import annotations

from agentd.protocol import ErrorCode, RpcError
from agentd.session import SessionError, SessionErrorKind

CODES: dict[SessionErrorKind, ErrorCode] = {
    SessionErrorKind.SHUTTING_DOWN: ErrorCode.SHUTTING_DOWN,
    SessionErrorKind.SESSION_STOPPING: ErrorCode.LIMIT_EXCEEDED,  # retryable, like any limit
    SessionErrorKind.SESSION_FAILED: ErrorCode.INTERNAL_ERROR,  # retryable (`data.retryable`)
    SessionErrorKind.LIMIT: ErrorCode.LIMIT_EXCEEDED,
    SessionErrorKind.RESYNC_REQUIRED: ErrorCode.RESYNC_REQUIRED,
    SessionErrorKind.CONNECTION_CLOSED: ErrorCode.CONNECTION_CLOSED,
    SessionErrorKind.REPLAY_DETACHED: ErrorCode.INVALID_REQUEST,
    SessionErrorKind.BUSY: ErrorCode.SESSION_BUSY,
    SessionErrorKind.INVALID: ErrorCode.INVALID_PARAMS,
    SessionErrorKind.INTERNAL: ErrorCode.INTERNAL_ERROR,
    SessionErrorKind.OWNED_ELSEWHERE: ErrorCode.SESSION_ELSEWHERE,
    SessionErrorKind.ROUTE_FAILED: ErrorCode.ROUTE_FAILED,  # `data.reason`, retryable
    SessionErrorKind.NOT_COMMITTED: ErrorCode.NOT_COMMITTED,  # `data.reason`, retryable
    SessionErrorKind.REQUEST_CONFLICT: ErrorCode.REQUEST_ID_CONFLICT,
}


def rpc_error(exc: SessionError | RpcError) -> RpcError:
    """The JSON-RPC error for `exc` (message and data as the session said them)."""
    if isinstance(exc, RpcError):
        return exc
    data = exc.data
    if data is None and exc.kind is SessionErrorKind.INTERNAL:
        data = {"reason": "internal", "retryable": False}  # says whether to retry (issue 26)
    return RpcError(CODES[exc.kind], exc.message, data)
