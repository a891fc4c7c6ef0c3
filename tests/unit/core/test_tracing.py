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
        "assert tracing.turn_span('t', {}, {'traceparent': '00-' + '1' * 32 + '-' + '2' * 16 + '-01'}) is a;"
        "assert tracing.commit_span('c', {}, [None]) is a and tracing.cause() is None;"
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


TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


def test_a_prompts_traceparent_parents_the_turn_and_its_writes_remember_the_turn() -> None:
    assert tracing.start({"OTEL_TRACES_EXPORTER": "console"}) is True
    try:
        meta = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01", "tracestate": "team=x"}
        with tracing.turn_span("agentd.turn", {}, meta) as turn:
            ctx = turn.get_span_context()
            assert f"{ctx.trace_id:032x}" == TRACE_ID and f"{turn.parent.span_id:016x}" == PARENT_ID
            assert ctx.trace_state.get("team") == "x"
            assert tracing.cause() == ctx  # what a write submitted now remembers
        assert tracing.cause() is None  # outside the turn: no cause
        with tracing.turn_span("agentd.turn", {}, {"traceparent": "garbage"}) as root:
            assert root.parent is None  # a malformed traceparent is ignored: a trace of its own
    finally:
        tracing.stop()


def test_a_commit_nests_under_its_one_turn_and_links_the_turns_of_a_shared_batch() -> None:
    assert tracing.start({"OTEL_TRACES_EXPORTER": "console"}) is True
    try:
        with tracing.turn_span("agentd.turn", {}) as a:
            first = tracing.cause()
        with tracing.turn_span("agentd.turn", {}) as b:
            second = tracing.cause()
        with tracing.commit_span("agentd.commit", {}, [first, None, first]) as commit:
            assert commit.parent.span_id == a.get_span_context().span_id
            assert commit.get_span_context().trace_id == a.get_span_context().trace_id and not commit.links
        with tracing.commit_span("agentd.commit", {}, [first, second]) as shared:
            assert shared.parent is None  # a batch of two turns belongs to neither's trace
            linked = {link.context.span_id for link in shared.links}
            assert linked == {a.get_span_context().span_id, b.get_span_context().span_id}
    finally:
        tracing.stop()
