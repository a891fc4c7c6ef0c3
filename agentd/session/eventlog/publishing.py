"""What the `EventWriter` (writer.py) does with a batch once it is through the store: each
event to its publish, in submission order — skipping a failed session's — and each barrier
and acknowledgement's waiter answered where it stood among them."""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Collection, Iterable
from time import monotonic
from types import MethodType
from typing import Any, Protocol

from agentd.core import Event
from agentd.session.commit_outcome import CommitOutcome
from agentd.session.eventlog.hub import EventHub
from agentd.session.eventlog.write_item import WriteItem

log = logging.getLogger(__name__)

# A batch's events in a row for one hub are published in one `EventHub.publish` call (it
# takes several: ~8 calls a trivial turn become ~2). Off: one call per event, as for any
# other publish (tests run both).
PUBLISH_RUNS = True
_HUB_PUBLISH = EventHub.publish


class Histogram(Protocol):
    # `counts[0]`: the bucket of a zero (every bound is a positive latency).
    counts: list[int]

    def observe(self, amount: float) -> None: ...

    def observe_many(self, amounts: Iterable[float]) -> None: ...


def publish_items(
    items: collections.deque[WriteItem],
    dropped: Collection[str],
    lag: Histogram | None,
    outcome_since: Callable[[str, int], CommitOutcome],
) -> None:
    """Publish the batch's events (not those of a `dropped` session: not durable, or after a
    refused batch) and answer its waiters; `lag`: the fan-out lag histogram, observed once
    for the batch (one call, not one per event)."""
    lags: list[float] | None = None if lag is None else []
    now = monotonic() if lag is not None else 0.0
    run: list[Event] = []  # events in a row for one hub's publish: `run_to`
    run_to: Any = None
    for item in items:
        event = item.event
        if event is None:
            if item.done is None and item.outcome is None:
                continue  # a write with nothing to show or answer: the run goes on
            if run:  # a waiter is answered after the events before it are published
                try:
                    run_to(*run)
                except Exception:  # a broken subscriber must not stop the log (in a run
                    log.exception("publishing event failed")  # of several the hub logs each)
                run = []
            if item.done is not None and not item.done.done():
                item.done.set_result(None)
            if item.outcome is not None and not item.outcome.done():
                item.outcome.set_result(outcome_since(item.session_id, item.since))
            continue
        publish = item.publish
        if publish is None or (dropped and item.session_id in dropped):
            continue  # not durable (or after a refused batch), so never shown
        if lags is not None:
            lags.append(now - item.submitted_at)
        if publish is run_to:
            run.append(event)
            continue
        if run:
            try:
                run_to(*run)
            except Exception:
                log.exception("publishing event failed")
            run = []
        if PUBLISH_RUNS and type(publish) is MethodType and publish.__func__ is _HUB_PUBLISH:
            run_to = publish
            run.append(event)
            continue
        run_to = None
        try:
            publish(event)
        except Exception:  # a broken subscriber must not stop the log
            log.exception("publishing event failed")
    if run:
        try:
            run_to(*run)
        except Exception:
            log.exception("publishing event failed")
    if lag is not None and lags:
        lag.observe_many(lags)
