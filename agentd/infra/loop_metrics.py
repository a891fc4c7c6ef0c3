"""Counters and histograms observed on the hot path (issue 32 item 1): every trivial turn
counted ~30 `prometheus_client` value increments (each under a lock, through a labels
look-up) for 5 events, 1 turn and 12 latency observations, ~3 % of the event loop's CPU.

These keep plain numbers instead — `inc` adds to a float (hot callers add to `value`
themselves), `observe` finds the bucket and adds to a list slot — and `LoopCollector`
renders them at scrape time as `prometheus_client` would render its own (same names,
samples, `le` labels and `_created` series), so the exposition does not change. No lock:
an app observes them from its event loop only (the journal, the writer and the hub run
there)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

__all__ = ["LoopCollector", "LoopCounter", "LoopHistogram"]


class LoopCounter:
    """A counter, optionally labelled: `inc()` when unlabelled, `labels(*values).inc()`
    otherwise (a child per label tuple, kept, so the look-up is one dict get)."""

    def __init__(self, name: str, doc: str, labelnames: Sequence[str] = ()) -> None:
        self.name, self.doc, self.labelnames = name, doc, tuple(labelnames)
        self.value = 0.0
        self.created = time.time()
        self._children: dict[tuple[str, ...], LoopCounter] = {}

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("counters can only be incremented by non-negative amounts")
        self.value += amount

    def labels(self, *values: str) -> LoopCounter:
        child = self._children.get(values)
        if child is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name} takes labels {self.labelnames}, got {values!r}")
            child = self._children[values] = LoopCounter(self.name, self.doc)
        return child

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily

        family = CounterMetricFamily(self.name, self.doc, labels=self.labelnames)
        if self.labelnames:
            for values, child in self._children.items():
                family.add_metric(list(values), child.value, created=child.created)
        else:
            family.add_metric([], self.value, created=self.created)
        yield family


class LoopHistogram:
    """An unlabelled histogram: a count per bucket (an observation equal to a bound falls
    in that bound's bucket, as Prometheus' `le`) and the sum."""

    def __init__(self, name: str, doc: str, buckets: Sequence[float]) -> None:
        self.name, self.doc = name, doc
        self.bounds = tuple(sorted(float(b) for b in buckets if b != float("inf")))
        self.counts = [0] * (len(self.bounds) + 1)  # the last one: above every bound (+Inf)
        self.sum = 0.0
        self.created = time.time()

    def observe(self, amount: float) -> None:
        self.sum += amount
        # Latencies land in the first few buckets: a scan from the bottom stops within a few
        # comparisons, cheaper than a `bisect_left` call (the same bucket: `le`, inclusive).
        i = 0
        for bound in self.bounds:
            if amount <= bound:
                break
            i += 1
        self.counts[i] += 1

    def observe_many(self, amounts: Iterable[float]) -> None:
        """`observe` each of `amounts`, in one call (the writer's fan-out lag: once per
        published batch, not per event)."""
        bounds, counts = self.bounds, self.counts
        for amount in amounts:
            self.sum += amount
            i = 0
            for bound in bounds:
                if amount <= bound:
                    break
                i += 1
            counts[i] += 1

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import HistogramMetricFamily
        from prometheus_client.samples import Sample
        from prometheus_client.utils import floatToGoString

        total = 0
        buckets: list[tuple[str, float]] = []
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            total += count
            buckets.append((floatToGoString(bound), float(total)))  # type: ignore[no-untyped-call]
        family = HistogramMetricFamily(self.name, self.doc)
        family.add_metric([], buckets, self.sum)
        family.samples.append(Sample(self.name + "_created", {}, self.created))
        yield family


class LoopCollector:
    """Registers the loop instruments with a `prometheus_client` registry."""

    def __init__(self, instruments: Sequence[LoopCounter | LoopHistogram]) -> None:
        self._instruments = tuple(instruments)

    def describe(self) -> list[Any]:
        return []  # labelled series come and go; nothing to check at registration

    def collect(self) -> Iterator[Any]:
        for instrument in self._instruments:
            yield from instrument.collect()
