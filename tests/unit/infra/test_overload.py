"""Database faults answer typed, retryable errors, never a bare `-32603` (issue 26 item 7):
which error a request that met one gets."""

from __future__ import annotations

import pytest
from sqlalchemy import exc as sa_exc

from agentd.infra.overload import overload_error
from agentd.protocol.jsonrpc import ErrorCode


def _raised(exc: BaseException) -> BaseException:
    """`exc` as raised inside the database layer (its traceback passes through SQLAlchemy)."""
    from sqlalchemy.engine import base

    code = compile("raise exc", base.__file__, "exec")
    try:
        exec(code, {"__name__": "sqlalchemy.engine.base", "exc": exc})
    except BaseException as raised:
        return raised
    raise AssertionError("not raised")


class _PgError(Exception):
    def __init__(self, message: str, sqlstate: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    ("exc", "limit"),
    [
        (sa_exc.DBAPIError("select", None, _PgError("terminating connection", "57P01")), "db_unavailable"),
        (sa_exc.InterfaceError("select", None, Exception("connection is closed")), "db_unavailable"),
        (ConnectionResetError("reset by peer"), "db_unavailable"),
        (sa_exc.TimeoutError("pool"), "db_pool"),
        (sa_exc.OperationalError("select", None, Exception("database is locked")), "db_busy"),
    ],
)
def test_a_database_fault_is_a_typed_retryable_error(exc: BaseException, limit: str) -> None:
    err = overload_error(_raised(exc))
    assert err is not None and err.code == ErrorCode.LIMIT_EXCEEDED
    assert err.data["limit"] == limit and err.data["retryable"] is True and err.data["retryAfter"] > 0


def test_other_errors_are_not_database_faults() -> None:
    assert overload_error(_raised(ValueError("a bug"))) is None
    assert overload_error(ConnectionResetError("a client socket, not the database")) is None
