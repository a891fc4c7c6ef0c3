"""Every session error kind has its JSON-RPC error, with the message and data the session
said — the codes clients rely on (docs/protocol.md)."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.protocol.jsonrpc import ErrorCode, RpcError
from agentd.session.errors import (
    SessionError,
    SessionErrorKind,
    limit_exceeded,
    session_failed,
    session_stopping,
    shutting_down,
)
from agentd.session.replicas.routing import route_failed
from agentd.transport.errors import CODES, rpc_error


def test_every_kind_has_a_code() -> None:
    assert set(CODES) == set(SessionErrorKind)


@pytest.mark.parametrize(
    ("error", "code", "message", "data"),
    [
        (
            shutting_down("server_shutting_down: the server is stopping"),
            -32018,
            "server_shutting_down: the server is stopping",
            None,
        ),
        (
            session_stopping("s1"),
            -32019,
            "session s1 is stopping; retry",
            {"limit": "session_stopping", "reason": "session_stopping", "retryable": True, "retryAfter": 0.5},
        ),
        (
            session_stopping("s1", 2.5),
            -32019,
            "session s1 is stopping; retry",
            {
                "limit": "session_stopping",
                "reason": "session_stopping",
                "retryable": True,
                "retryAfter": 1.0,
                "max": 2.5,
            },
        ),
        (
            session_stopping("s1", 0.05),
            -32019,
            "session s1 is stopping; retry",
            {
                "limit": "session_stopping",
                "reason": "session_stopping",
                "retryable": True,
                "retryAfter": 0.1,
                "max": 0.05,
            },
        ),
        (
            session_failed("s1"),
            -32603,
            "session_failed: the database refused the events of session s1; "
            "it was reloaded from its last saved event — retry",
            {"reason": "session_failed", "retryable": True},
        ),
        (
            limit_exceeded("queue_length", 3, "queue full"),
            -32019,
            "queue full",
            {"limit": "queue_length", "max": 3},
        ),
        (
            limit_exceeded("queued_bytes_session", 10, "too large", size=4),
            -32019,
            "too large",
            {"limit": "queued_bytes_session", "max": 10, "size": 4},
        ),
        (
            SessionError(SessionErrorKind.RESYNC_REQUIRED, "resync_required: x", {"lastSeq": 3}),
            -32017,
            "resync_required: x",
            {"lastSeq": 3},
        ),
        (
            SessionError(SessionErrorKind.CONNECTION_CLOSED, "replay stopped: c"),
            -32013,
            "replay stopped: c",
            None,
        ),
        (
            SessionError(SessionErrorKind.REPLAY_DETACHED, "replay stopped: d"),
            -32600,
            "replay stopped: d",
            None,
        ),
        (
            SessionError(SessionErrorKind.INTERNAL, "session s1: refused"),
            -32603,
            "session s1: refused",
            {"reason": "internal", "retryable": False},
        ),
        (
            route_failed("owner_lost", "replica a is gone; retry"),
            -32021,  # its own code: a client tells "retry" from a bug (-32603)
            "owner_lost: replica a is gone; retry",
            {"reason": "owner_lost", "retryable": True},
        ),
    ],
)
def test_the_wire_error_of_a_session_error(
    error: SessionError, code: int, message: str, data: dict[str, Any] | None
) -> None:
    wire = rpc_error(error)
    assert (wire.code, wire.message, wire.data) == (code, message, data)
    expected = {"code": code, "message": message, **({"data": data} if data is not None else {})}
    assert wire.to_dict() == expected
    if data is not None:
        assert list(wire.to_dict()["data"]) == list(data)  # same key order on the wire


def test_an_rpc_error_passes_through() -> None:
    err = RpcError(ErrorCode.INVALID_PARAMS, "bad")
    assert rpc_error(err) is err
