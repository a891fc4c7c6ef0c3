"""JSON-RPC 2.0 envelopes and error codes (R-P4)."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

# ids may be integers (including 0) or strings; `None` only in error responses to
# messages whose id could not be read.
RequestId = StrictInt | StrictStr


class ErrorCode(IntEnum):
    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    # ACP
    AUTH_REQUIRED = -32000
    RESOURCE_NOT_FOUND = -32002
    REQUEST_CANCELLED = -32800  # the caller sent `$/cancel_request` for it (LSP's range)
    # agentd's own (documented in docs/protocol.md)
    SESSION_BUSY = -32011  # reserved: an operation that needs an idle session
    TURN_FAILED = -32012  # the prompt's turn ended `Failed`; `data` carries the error kind
    CONNECTION_CLOSED = -32013  # the peer went away while a request was pending
    PERMISSION_DENIED = -32014  # the principal may not touch this session
    WORKSPACE_DENIED = -32015  # `cwd` outside the configured workspace root
    TURN_NOT_ACTIVE = -32016  # `_agentd/interject` named a turn that is no longer running
    RESYNC_REQUIRED = -32017  # an attach cursor that cannot be served: start over from a snapshot
    LIMIT_EXCEEDED = -32019  # an input limit (R-X3); `data`: {limit, max, retryAfter?}
    SHUTTING_DOWN = -32018  # the server is draining for a shutdown: retry against its successor
    SESSION_ELSEWHERE = -32020  # another replica owns the session (R-C1): `data.owner`, retryAfter
    ROUTE_FAILED = -32021  # a command forwarded to the owning replica got no answer: `data.reason`, retryable
    NOT_COMMITTED = -32022  # the request's rows never reached the database: `data.reason`, retryable
    REQUEST_ID_CONFLICT = -32030  # a `requestId` reused with other content: `data.promptId` is the first's


class RpcError(Exception):
    """Raised by handlers; the dispatcher turns it into an error response."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err

    @classmethod
    def method_not_found(cls, method: str) -> RpcError:
        return cls(ErrorCode.METHOD_NOT_FOUND, f"Method not found: {method}")

    @classmethod
    def invalid_params(cls, message: str, data: Any = None) -> RpcError:
        return cls(ErrorCode.INVALID_PARAMS, message, data)

    @classmethod
    def not_found(cls, what: str) -> RpcError:
        return cls(ErrorCode.RESOURCE_NOT_FOUND, f"Resource not found: {what}")

    @classmethod
    def internal(cls, message: str = "Internal error") -> RpcError:
        return cls(ErrorCode.INTERNAL_ERROR, message)


class Request(BaseModel):
    """An incoming request (with id) or notification (without)."""

    model_config = ConfigDict(extra="forbid")

    jsonrpc: str = Field(pattern=r"^2\.0$")
    method: StrictStr
    params: dict[str, Any] | list[Any] | None = None
    id: RequestId | None = None

    @property
    def is_notification(self) -> bool:
        return "id" not in self.model_fields_set


class Response(BaseModel):
    """A response to one of *our* requests (server→client), as the client sends it back."""

    model_config = ConfigDict(extra="forbid")

    jsonrpc: str = Field(pattern=r"^2\.0$")
    id: RequestId | None
    result: Any = None
    error: dict[str, Any] | None = None


def response(id: RequestId | None, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "result": result}


def error_response(id: RequestId | None, error: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "error": error.to_dict()}


def notification(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def request(id: RequestId, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params}
