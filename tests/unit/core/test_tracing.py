"""Tracing is off unless the standard OTEL_* variables ask for it; off, it costs one shared
no-op context manager and never loads the SDK."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentd.core import tracing


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
    ],
)
def test_the_standard_variables_decide_whether_traces_are_wanted(env: dict[str, str], on: bool) -> None:
    assert tracing.wanted(env) is on


def test_off_it_is_one_shared_no_op_and_the_sdk_is_never_loaded() -> None:
    code = (
        "import sys; from agentd.core import tracing;"
        "assert tracing.start({}) is False and not tracing.enabled();"
        "a = tracing.span('x', {}); b = tracing.span('y', {'k': 1});"
        "assert a is b;"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_on_spans_are_real_and_stop_turns_tracing_off() -> None:
    assert tracing.start({"OTEL_TRACES_EXPORTER": "console"}) is True
    try:
        with tracing.span("agentd.test", {"agentd.session_id": "s1"}) as span:
            assert span is not None and span.is_recording()
            assert span.attributes["agentd.session_id"] == "s1"
    finally:
        tracing.stop()
    assert not tracing.enabled() and tracing.span("x", {}) is tracing.span("y", {})
