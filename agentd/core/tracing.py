"""OpenTelemetry traces, optional (issue 15 item 6): spans for the turn, each sampling round,
each tool call and each group commit, carrying the session and turn ids.

One trace per turn: a prompt's W3C `traceparent` (from its `_meta`) parents the turn's span,
sampling spans carry the GenAI semantic-convention attributes, and a group commit — run by
the writer task, outside any turn — is parented to the turn whose writes it carries (linked
to each turn when a batch carries several), so a turn's trace shows its commits.

Off unless the standard `OTEL_*` variables ask for traces (`OTEL_EXPORTER_OTLP_ENDPOINT`,
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_TRACES_EXPORTER`; `OTEL_SDK_DISABLED=true`
or `OTEL_TRACES_EXPORTER=none` keep them off) and the `agentd[otel]` extra is installed.
Everything else about the export — endpoint, headers, timeout, compression, batching
(`OTEL_BSP_*`), `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES` — is read by the SDK itself.

Off, `span()` hands back one shared no-op context manager: no import of the SDK, no
allocation beyond the caller's attribute dict. The provider is agentd's own (not the
process-global one), so an embedding application keeps its tracing to itself.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

log = logging.getLogger(__name__)

SERVICE_NAME = "agentd"
_NOOP: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
_tracer: Any = None  # an OTel `Tracer` while tracing is on
_provider: Any = None  # its `TracerProvider` (flushed and shut down by `stop`)
# The span context of the turn running in this task (and the tasks it starts): what the
# writes it submits remember, so their commit nests under it.
_turn: contextvars.ContextVar[Any] = contextvars.ContextVar("agentd_trace_turn", default=None)


def wanted(env: Mapping[str, str]) -> bool:
    """Do the standard variables ask for traces?"""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    return bool(exporter) or any(
        env.get(k, "").strip() for k in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def enabled() -> bool:
    """Tracing is on: worth building attributes that cost something."""
    return _tracer is not None


def start(env: Mapping[str, str] | None = None) -> bool:
    """Turn tracing on when the environment asks for it; True when it is on."""
    global _tracer, _provider
    env = os.environ if env is None else env
    if _tracer is not None or not wanted(env):
        return _tracer is not None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
    except ImportError:
        log.warning("OTEL_* variables ask for traces but the SDK is missing: pip install 'agentd[otel]'")
        return False
    exporter: SpanExporter
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "console":
        exporter = ConsoleSpanExporter()
    else:
        protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        if protocol and protocol.strip() != "http/protobuf":
            log.warning("OTLP protocol %r is not supported; exporting with http/protobuf", protocol)
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            log.warning("the OTLP exporter is missing: pip install 'agentd[otel]'")
            return False
        exporter = OTLPSpanExporter()
    attributes = {} if env.get("OTEL_SERVICE_NAME") else {"service.name": SERVICE_NAME}
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    _provider, _tracer = provider, provider.get_tracer("agentd")
    log.info("OpenTelemetry traces on")
    return True


def stop() -> None:
    """Export what is pending and turn tracing off (blocking: call it from a thread)."""
    global _tracer, _provider
    provider, _provider, _tracer = _provider, None, None
    if provider is not None:
        provider.shutdown()


def span(name: str, attributes: Mapping[str, Any]) -> contextlib.AbstractContextManager[Any]:
    """A span around a block (current while it runs, so nested spans become its children);
    a shared no-op when tracing is off. An exception leaving the block marks it failed."""
    if _tracer is None:
        return _NOOP
    return _tracer.start_as_current_span(name, attributes=dict(attributes))  # type: ignore[no-any-return]


def turn_span(name: str, attributes: Mapping[str, Any], meta: Mapping[str, Any] | None = None) -> Any:
    """The turn's span: a child of the prompt's W3C `traceparent` (`meta`, the prompt's
    `_meta`; a malformed one is ignored) or else of the current span; while it runs, writes
    submitted here remember it (`cause`). A shared no-op when tracing is off."""
    if _tracer is None:
        return _NOOP
    return _turn_span(name, attributes, meta or {})


@contextlib.contextmanager
def _turn_span(name: str, attributes: Mapping[str, Any], meta: Mapping[str, Any]) -> Iterator[Any]:
    parent = None
    if isinstance(traceparent := meta.get("traceparent"), str):
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        carrier = {"traceparent": traceparent}
        if isinstance(tracestate := meta.get("tracestate"), str):
            carrier["tracestate"] = tracestate
        parent = TraceContextTextMapPropagator().extract(carrier)
    with _tracer.start_as_current_span(name, context=parent, attributes=dict(attributes)) as span:
        token = _turn.set(span.get_span_context())
        try:
            yield span
        finally:
            _turn.reset(token)


# `cause()`: the span context of the turn running here (None when off or outside a turn).
# Only `turn_span` sets `_turn`, and only while tracing is on, so the context variable's own
# `get` answers it — no Python call for every write the writer is handed. (Were tracing
# stopped in the middle of a turn, the cause it returns is ignored: `commit_span` is a no-op
# then.)
cause = _turn.get


def commit_span(name: str, attributes: Mapping[str, Any], causes: Iterable[Any]) -> Any:
    """A group commit's span: a child of the one turn whose writes it carries, or — a batch
    of several turns' writes — a root span linked to each. A no-op when tracing is off."""
    if _tracer is None:
        return _NOOP
    from opentelemetry import context, trace

    unique = list({(c.trace_id, c.span_id): c for c in causes if c is not None}.values())
    if len(unique) == 1:
        parent = trace.set_span_in_context(trace.NonRecordingSpan(unique[0]))
        links: list[Any] = []
    else:  # never parented to whatever happens to be current in the writer task
        parent, links = context.Context(), [trace.Link(c) for c in unique]
    return _tracer.start_as_current_span(name, context=parent, links=links, attributes=dict(attributes))
