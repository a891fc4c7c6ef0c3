"""OpenTelemetry traces, optional (issue 15 item 6): spans for the turn, each sampling round,
each tool call and each group commit, carrying the session and turn ids.

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
import logging
import os
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)

SERVICE_NAME = "agentd"
_NOOP: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
_tracer: Any = None  # an OTel `Tracer` while tracing is on
_provider: Any = None  # its `TracerProvider` (flushed and shut down by `stop`)


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
