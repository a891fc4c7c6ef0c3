"""The hot path's counters and histograms (agentd/infra/loop_metrics.py) render exactly as
`prometheus_client`'s own would for the same observations: same series, buckets (a value on
a bound counts in that bound's bucket), sums and `_created` series."""

from __future__ import annotations

import re

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from agentd.infra.loop_metrics import LoopCollector, LoopCounter, LoopHistogram

BUCKETS = (0.0005, 0.001, 0.0025, 0.5, 2.5)
SAMPLES = (0.0, 0.0005, 0.0007, 0.001, 0.3, 2.5, 2.6, 40.0)


def _exposition(registry: CollectorRegistry) -> list[str]:
    """The text exposition, `_created` timestamps blanked, in a stable order."""
    text = generate_latest(registry).decode()
    return sorted(re.sub(r"(_created(\{[^}]*\})?) \S+", r"\1 T", line) for line in text.splitlines())


def test_a_loop_histogram_renders_as_prometheus_client_s_histogram() -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    reference = Histogram("agentd_x_seconds", "A latency", buckets=BUCKETS, registry=theirs)
    loop = LoopHistogram("agentd_x_seconds", "A latency", BUCKETS)
    ours.register(LoopCollector([loop]))
    for value in SAMPLES:
        reference.observe(value)
        loop.observe(value)
    assert _exposition(ours) == _exposition(theirs)
    assert 'agentd_x_seconds_bucket{le="0.001"} 4.0' in _exposition(ours)  # 0.001 itself included


def test_observe_many_is_observe_of_each() -> None:
    # The writer observes a batch's fan-out lags in one call: the same buckets and sum.
    one, many = LoopHistogram("a", "a", BUCKETS), LoopHistogram("b", "b", BUCKETS)
    for value in SAMPLES:
        one.observe(value)
    many.observe_many(SAMPLES[:3])
    many.observe_many([])
    many.observe_many(list(SAMPLES[3:]))
    assert many.counts == one.counts and many.sum == one.sum
    assert sum(many.counts) == len(SAMPLES) and many.counts[-1] == 2  # 2.6 and 40 above every bound


def test_loop_counters_render_as_prometheus_client_s_counters() -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    plain = Counter("agentd_things", "Things", registry=theirs)
    labelled = Counter("agentd_turns", "Turns", ["outcome", "reason"], registry=theirs)
    loop_plain = LoopCounter("agentd_things", "Things")
    loop_labelled = LoopCounter("agentd_turns", "Turns", ["outcome", "reason"])
    ours.register(LoopCollector([loop_plain, loop_labelled]))
    for counter, labels in ((plain, labelled), (loop_plain, loop_labelled)):
        counter.inc()
        counter.inc(2.5)
        labels.labels("completed", "").inc()
        labels.labels("completed", "").inc()
        labels.labels("cancelled", "max_turns_reached").inc()
    assert _exposition(ours) == _exposition(theirs)
    assert "agentd_things_total 3.5" in _exposition(ours)


def test_a_loop_counter_refuses_a_decrement_and_wrong_labels_and_keeps_its_value() -> None:
    counter = LoopCounter("agentd_turns", "Turns", ["outcome"])
    counter.labels("completed").inc()
    with pytest.raises(ValueError, match="non-negative"):
        counter.labels("completed").inc(-1)
    with pytest.raises(ValueError, match="takes labels"):
        counter.labels("completed", "extra")
    assert counter.labels("completed").value == 1.0


def test_metrics_count_events_turns_and_retries_by_their_exact_types() -> None:
    # `Metrics.observe_event` compares update types by identity (no `isinstance` per event):
    # right only while neither counted type has a subclass.
    from agentd.core import AgentTextChunk, RetryDecided, TurnEnded
    from agentd.infra import Metrics

    assert TurnEnded.__subclasses__() == [] and RetryDecided.__subclasses__() == []
    metrics = Metrics()
    ended = TurnEnded(
        turn_id="t1", prompt_id="p1", outcome="completed", stop_reason="end_turn", tools_called=0
    )
    reported = TurnEnded(
        turn_id="t2",
        prompt_id="p2",
        outcome="max_turns_reached",
        stop_reason="max_turn_requests",
        tools_called=0,
        turn={"reportedAs": {"outcome": "cancelled", "reason": "max_turns_reached"}},
    )
    retry = RetryDecided(decision={"decision": "retry", "bucket": "transient"})
    for update in (AgentTextChunk("m1", "a", 0), ended, reported, retry, ended):
        metrics.observe_event(update)
    text = metrics.render().decode()
    assert "agentd_events_total 5.0" in text
    assert 'agentd_turns_total{outcome="completed"} 2.0' in text
    assert 'agentd_turns_total{outcome="cancelled"} 1.0' in text
    assert 'agentd_turns_reported_total{outcome="cancelled",reason="max_turns_reached"} 1.0' in text
    assert 'agentd_retry_decisions_total{bucket="transient",decision="retry"} 1.0' in text
    metrics.flush_seconds.observe(0.002)
    assert metrics.flush_seconds is metrics.flush_seconds  # looked up once, then an attribute
    assert 'agentd_db_flush_seconds_bucket{le="0.0025"} 1.0' in metrics.render().decode()
