"""Prometheus metrics at `/metrics` (R-O): sessions, clients, turns and their outcomes,
retry decisions, event fan-out lag and the event log's flush latency; per replica (R-C1),
the replica's id (`agentd_replica_info`) and its session leases — owned, renewals, renewal
failures, losses — labelled `replica` (read from the leases at scrape time).

One registry per app (tests run several apps in one process). The server's parts report
through the small methods below; nothing else here knows about them.

The instruments are made at the first observation, as plain numbers (loop_metrics);
`prometheus_client` (with `http.server`, `wsgiref`, `urllib.request`) loads at the first
scrape or routed command, not at start-up nor with the first turn (idle memory, issue 14;
memory after the first turn, issue 32 item 3): the registry is made then over the same
instruments, so nothing observed is lost and a scrape shows every series.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from agentd.core import RetryDecided, TurnEnded, Update
from agentd.infra.loop_metrics import LoopCollector, LoopCounter, LoopHistogram

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = ["Metrics"]

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class _LeaseCollector:
    """Series read from `health()` (agentd/session/replicas/leases.py's `LeaseHealth`) per scrape:
    the counters live in the leases, so nothing counted before the first scrape is lost."""

    def __init__(self, health: Callable[[], Any]) -> None:
        self._health = health

    def describe(self) -> list[Any]:
        return []  # series vary (no lease series on SQLite); nothing to check at register

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily

        h = self._health()
        info = InfoMetricFamily("agentd_replica", "This replica's id and how it owns sessions")
        info.add_metric([], {"replica": h.replica_id, "leases": str(h.mode)})
        yield info
        if str(h.mode) == "single_process":  # SQLite: no leases, this process owns every session
            return
        labels = ["replica"]
        gauge, counter = GaugeMetricFamily, CounterMetricFamily
        series: list[tuple[type[Any], str, str, float | None]] = [
            (gauge, "agentd_lease_owned_sessions", "Sessions whose lease this replica holds", h.owned),
            (counter, "agentd_lease_renewals", "Lease renewal statements that went through", h.renewals),
            (counter, "agentd_lease_renewal_failures", "Lease renewal rounds that failed",
             h.renewal_failures),
            (counter, "agentd_lease_losses",
             "Session leases lost (taken over, run out unrenewed, or a write fenced out)", h.lost),
            (gauge, "agentd_lease_renewal_age_seconds", "Since the last successful renewal round",
             h.last_renewal_age_s),
            (gauge, "agentd_lease_healthy", "1 while the lease renewer keeps up (/readyz)",
             float(h.healthy)),
        ]  # fmt: skip
        for family, name, doc, value in series:
            if value is None:
                continue
            metric = family(name, doc, labels=labels)
            metric.add_metric([h.replica_id], value)
            yield metric


class _LiveCollector:
    """The live publisher's figures (agentd/session/replicas/live.py), read per scrape."""

    def __init__(self, publisher: Any) -> None:
        self._publisher = publisher

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        p = self._publisher
        yield CounterMetricFamily(
            "agentd_live_events_published", "Transient events sent toward the broker", value=p.published
        )
        yield CounterMetricFamily(
            "agentd_live_watch_heard",
            "Announcements of watches on other replicas heard",
            value=p.watched.heard,
        )
        yield GaugeMetricFamily(
            "agentd_live_watched_sessions", "Sessions watched on another replica now", value=len(p.watched)
        )


class _Instruments:
    """What the server's hot paths count: plain numbers (agentd/infra/loop_metrics.py), no
    `prometheus_client` — a first turn need not load it (issue 32 item 3: ~1 MiB that stayed
    after the first turn). The registry, with the gauges and the replicas' instruments, is
    made at the first scrape or routed command (`registry`)."""

    def __init__(self, live: Callable[[], list[Any]] | None, leases: Callable[[], Any] | None) -> None:
        self._live, self._leases = live, leases
        self._publisher: Any = None  # the live publisher (several replicas only)
        # Counted on every turn: plain numbers, rendered at scrape time (loop_metrics).
        self.turns = LoopCounter("agentd_turns", "Turns ended, by outcome", ["outcome"])
        self.turns_by_reason = LoopCounter(
            "agentd_turns_reported",
            "Turns reported as another outcome, with the reason label (max_turns_reached)",
            ["outcome", "reason"],
        )
        self.retries = LoopCounter(
            "agentd_retry_decisions", "Retry decisions, by decision and bucket", ["decision", "bucket"]
        )
        self.events = LoopCounter("agentd_events", "Durable events appended to the log")
        self.resyncs = LoopCounter("agentd_client_resyncs", "Clients dropped for falling behind")
        self.flush_seconds = LoopHistogram(
            "agentd_db_flush_seconds", "Group-commit latency of the event log", _LATENCY_BUCKETS
        )
        self.fanout_lag_seconds = LoopHistogram(
            "agentd_event_fanout_lag_seconds",
            "From an event's submission to its delivery to the session's clients",
            _LATENCY_BUCKETS,
        )

    @functools.cached_property
    def registry(self) -> CollectorRegistry:
        """The registry, made once: the series in the order they always had."""
        from prometheus_client import CollectorRegistry, Gauge

        r = CollectorRegistry()
        self.sessions_live = Gauge("agentd_sessions_live", "Session actors in memory", registry=r)
        self.clients = Gauge("agentd_clients_attached", "Client subscriptions over all sessions", registry=r)
        self.turns_running = Gauge("agentd_turns_running", "Turns running now", registry=r)
        self.queued = Gauge("agentd_prompts_queued", "Prompts waiting in session queues", registry=r)
        r.register(LoopCollector([self.resyncs]))
        r.register(
            LoopCollector(
                [self.turns, self.turns_by_reason, self.retries, self.events, self.flush_seconds,
                 self.fanout_lag_seconds]
            )
        )  # fmt: skip
        self._routing(r)
        if self._live is not None:
            self._set_live(self._live)
        if self._leases is not None:
            r.register(_LeaseCollector(self._leases))
        if self._publisher is not None:
            r.register(_LiveCollector(self._publisher))
        return r

    # ---- replicas: routed commands and NOTIFY wake-ups (R-C1, issue 15 item 2)
    def _routing(self, r: CollectorRegistry) -> None:
        from prometheus_client import Counter, Histogram

        self.routed = Counter(
            "agentd_routed_commands",
            "Commands forwarded to the replica owning their session, by method and outcome",
            ["method", "outcome"],
            registry=r,
        )
        self.notify_lag_seconds = Histogram(
            "agentd_notify_lag_seconds",
            "From a NOTIFY's arrival to its events published to this replica's watching clients",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )

    def track(self, live: Callable[[], list[Any]]) -> None:
        self._live = live
        if "registry" in self.__dict__:
            self._set_live(live)

    def _set_live(self, live: Callable[[], list[Any]]) -> None:
        self.sessions_live.set_function(lambda: len(live()))
        self.clients.set_function(lambda: sum(len(a.hub) for a in live()))
        self.turns_running.set_function(lambda: sum(1 for a in live() if a.running_turn_id))
        self.queued.set_function(lambda: sum(a.queued for a in live()))

    def track_leases(self, health: Callable[[], Any]) -> None:
        self._leases = health
        if "registry" in self.__dict__:
            self.registry.register(_LeaseCollector(health))

    def track_live(self, publisher: Any) -> None:
        self._publisher = publisher
        if "registry" in self.__dict__:
            self.registry.register(_LiveCollector(publisher))


class Metrics:
    # The updates `observe_event` counts more of than the event itself (by exact type).
    OBSERVED: frozenset[type[Update]] = frozenset({TurnEnded, RetryDecided})

    def __init__(self) -> None:
        self._live: Callable[[], list[Any]] | None = None
        self._leases: Callable[[], Any] | None = None
        self._publisher: Any = None

    @functools.cached_property
    def _m(self) -> _Instruments:
        m = _Instruments(self._live, self._leases)
        if self._publisher is not None:
            m.track_live(self._publisher)
        return m

    @property
    def loaded(self) -> bool:
        """Whether the instruments exist yet (`prometheus_client` comes with the registry)."""
        return "_m" in self.__dict__

    def track_sessions(self, live: Callable[[], list[Any]]) -> None:
        """Gauges read from the live actors at scrape time."""
        self._live = live
        if self.loaded:
            self._m.track(live)

    def track_live(self, publisher: Any) -> None:
        """The live publisher's counts (a `LivePublisher`), read at scrape time."""
        self._publisher = publisher
        if self.loaded:
            self._m.track_live(publisher)

    def track_leases(self, health: Callable[[], Any]) -> None:
        """The replica's id and its leases' figures (a `LeaseHealth`), read at scrape time."""
        self._leases = health
        if self.loaded:
            self._m.track_leases(health)

    @property
    def registry(self) -> CollectorRegistry:
        return self._m.registry

    @property
    def resyncs(self) -> LoopCounter:
        return self._m.resyncs

    # Read per commit: kept in the instance once looked up (the instruments never change
    # once made), so a later read is an attribute, not a property call.
    @functools.cached_property
    def flush_seconds(self) -> LoopHistogram:
        return self._m.flush_seconds

    @functools.cached_property
    def fanout_lag_seconds(self) -> LoopHistogram:
        return self._m.fanout_lag_seconds

    @functools.cached_property
    def events(self) -> LoopCounter:
        """Durable events appended: the journal adds to its `value` itself for an update
        `observe_event` has no more to count for (not in `OBSERVED`) — one call fewer
        per event (issue 32)."""
        return self._m.events

    def observe_event(self, update: Update) -> None:
        m = self._m
        m.events.value += 1.0  # (`inc()` without its call: once per event appended)
        # (types compared by identity: no `isinstance` call per event; neither has subclasses)
        if type(update) is TurnEnded:
            # A turn may be reported as another outcome (000: MaxTurnsReached counts as
            # Cancelled with reason max_turns_reached); the loop writes that on the turn.
            turn = update.turn
            reported = turn.get("reportedAs") if isinstance(turn, dict) else None
            outcome = reported.get("outcome") if isinstance(reported, dict) else None
            m.turns.labels(str(outcome or update.outcome)).value += 1.0
            if isinstance(reported, dict) and reported.get("reason"):
                m.turns_by_reason.labels(str(outcome), str(reported["reason"])).inc()
        elif type(update) is RetryDecided:
            decision = update.decision
            m.retries.labels(str(decision.get("decision", "")), str(decision.get("bucket", ""))).inc()

    # ---- replicas (R-C1, issue 15 item 2)
    def routed(self, method: str, outcome: str) -> None:
        """A command forwarded to its session's owner ended (`RouteOutcome`)."""
        m = self._m
        m.registry  # noqa: B018 - made at the first: these two are prometheus_client's
        m.routed.labels(method, outcome).inc()

    def notify_lag(self, seconds: float) -> None:
        m = self._m
        m.registry  # noqa: B018 - (as above)
        m.notify_lag_seconds.observe(seconds)

    @property
    def content_type(self) -> str:
        """The exposition format's media type (`render()`'s)."""
        from prometheus_client.exposition import CONTENT_TYPE_LATEST

        return CONTENT_TYPE_LATEST

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self._m.registry)
