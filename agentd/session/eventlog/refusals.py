"""What the event writer makes of a commit the database refused (writer.py): retry it
as it is, or fail its session — and as what."""

from __future__ import annotations

from typing import Protocol

from sqlalchemy import exc as sa_exc

from agentd.store import Batch, StaleFence, is_disconnect, is_unique_violation


class _Leases(Protocol):
    async def lease_token(self, session_id: str) -> int | None: ...


async def restated(store: _Leases, batch: Batch, exc: BaseException) -> BaseException:
    """A unique index's refusal of a fenced batch whose lease was taken over since it was
    stamped is the stale fence it stands for (`StaleFence`: reported as the lost lease, not
    as bad data): Postgres may check the index before the fence trigger."""
    if batch.fence is None or not is_unique_violation(exc):
        return exc
    try:
        token = await store.lease_token(batch.session_id)
    except Exception:  # unknown: reported as it came
        return exc
    if token is None or token == batch.fence:
        return exc
    stale = StaleFence(
        f"agentd_stale_fence: session {batch.session_id} written under token {batch.fence}, "
        f"the lease's is {token} (refused by a unique index first: {exc})"
    )
    stale.__cause__ = exc
    return stale


def is_transient(exc: BaseException) -> bool:
    """Errors worth retrying as they are: the connection, not the data."""
    if isinstance(
        exc,
        (
            OSError,
            ConnectionError,
            TimeoutError,
            sa_exc.TimeoutError,  # no pooled connection free in time (a flood of requests)
            sa_exc.OperationalError,
            sa_exc.InterfaceError,
        ),
    ):
        return True
    return is_disconnect(exc)
