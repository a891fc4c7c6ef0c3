"""One group commit carried through faults: a connection error or a deadlock is retried
(a deadlock at most `MAX_DEADLOCK_RETRIES` times), doubling the pause up to
`MAX_RETRY_DELAY_S`, until the database answers or `give_up_after_s` passes (`GaveUp`); a
commit whose answer was lost with its connection is first looked for in the store — it may
have committed. Nothing is published meanwhile: the event writer (writer.py) publishes only
what this answered None for."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from time import monotonic
from typing import Any, Protocol

from agentd.core import tracing
from agentd.session.commit_outcome import is_deadlock
from agentd.session.eventlog.refusals import is_transient
from agentd.store import Batch, Store, is_disconnect

log = logging.getLogger(__name__)

# A failed commit is retried after 50 ms, doubling up to this: a reset costs the sessions
# little more than the reconnection, and an outage one connection attempt per interval.
MAX_RETRY_DELAY_S = 0.5
# A batch that deadlocks this many times in a row is refused (it fails its session).
MAX_DEADLOCK_RETRIES = 5


class GaveUp(Exception):
    """The database stayed unreachable for the writer's whole deadline."""


class CommitHealth(Protocol):
    """Where a retried commit says what is failing, and since when (/readyz reads it)."""

    failing_since: float | None
    last_error: str


def commit_attributes(batches: dict[str, Batch]) -> dict[str, Any]:
    """The commit span's attributes (none unless tracing is on)."""
    if not tracing.enabled():
        return {}
    return {
        "agentd.session_ids": sorted(batches),
        "agentd.events": sum(len(b.events) for b in batches.values()),
        "agentd.messages": sum(len(b.messages) for b in batches.values()),
    }


async def commit_retrying(
    store: Store,
    batches: list[Batch],
    first: Exception | None,
    *,
    give_up_after_s: float,
    health: CommitHealth,
    committed: Callable[[float | None], None],
) -> BaseException | None:
    """Commit `batches` together: None once committed (`committed(started)`, or
    `committed(None)` when a commit in doubt had landed already); else the error that
    refused them for good. `first`: what the caller's own first try raised."""
    loop = asyncio.get_running_loop()
    give_up_at = loop.time() + give_up_after_s
    delay, deadlocks, in_doubt = 0.05, 0, False
    failure = first
    while True:
        if failure is None:
            try:
                if not (in_doubt and await store.landed(batches)):
                    started = monotonic()
                    await store.commit(batches)
                    committed(started)
                else:
                    committed(None)
                return None
            except Exception as err:
                failure = err
        exc, failure = failure, None
        deadlock = is_deadlock(exc)
        deadlocks += deadlock
        if not (is_transient(exc) or deadlock) or deadlocks > MAX_DEADLOCK_RETRIES:
            return exc
        in_doubt = in_doubt or is_disconnect(exc)
        if health.failing_since is None:
            health.failing_since = loop.time()
        health.last_error = f"{type(exc).__name__}: {exc}"[:300]
        if loop.time() + delay > give_up_at:
            return GaveUp(f"the database stayed unreachable for {give_up_after_s:g}s: {exc}")
        # Never publish what is not committed; keep trying (the DB may be restarting).
        log.warning("event log commit failed (%s); retrying in %.2fs", exc, delay)
        await asyncio.sleep(delay)
        delay = min(delay * 2, MAX_RETRY_DELAY_S)
