"""OpenTelemetry traces (issue 15 item 6): with the standard `OTEL_*` variables set, a real
`agentd serve` exports — through the official OTLP/HTTP exporter, to a local collector — a
span per turn, per sampling round, per tool call and per commit, carrying the session and
turn ids, the rounds and tool calls nested under their turn. A prompt's W3C
`_meta.traceparent` parents the turn, sampling spans carry the OpenTelemetry GenAI attributes,
and the commits of the turn's writes nest under it (not root traces of their own). Without the
variables it exports nothing and never loads the SDK (tests/unit/core/test_tracing.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.client import WsClient, text_prompt
from tests.support.fakes.otlp_collector import CollectedSpan, FakeCollector
from tests.support.polling import until
from tests.support.proc import agentd_serve, write_script
from tests.support.session import new_session, tool_call

pytestmark = pytest.mark.timeout(120)


CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


def _named(spans: list[CollectedSpan], name: str, **attrs: str) -> list[CollectedSpan]:
    return [s for s in spans if s.name == name and all(s.attributes.get(k) == v for k, v in attrs.items())]


async def test_a_turn_exports_nested_spans_with_session_and_turn_ids(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    usage = {"input_tokens": 120, "output_tokens": 7, "cache_read_tokens": 30, "cache_write_tokens": 5}
    steps = [
        {"tool_calls": [tool_call("list_dir", "call_ls", path=".")], "usage": {**usage, "model": "m-2026"}},
        {"text": "listed"},
    ]
    script = write_script(tmp_path / "script.json", steps, loop=False)
    async with FakeCollector() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # export within 50 ms, not 5 s
        monkeypatch.setenv("OTEL_SERVICE_NAME", "agentd-under-test")
        async with agentd_serve(tmp_path / "home", script=str(script)) as server:
            client = await WsClient.connect(server.base_url)
            sid = await new_session(client, workspace)
            prompt = text_prompt(sid, "list it")
            prompt["_meta"] = {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"}  # the caller's span
            done = await client.request("session/prompt", prompt)
            assert done["result"]["stopReason"] == "end_turn", done
            turn_id = done["result"]["_meta"]["agentd"]["turnId"]
            await client.close()

            ids = {"agentd.session_id": sid, "agentd.turn_id": turn_id}
            await until(lambda: _named(collector.spans, "agentd.turn", **ids), what="the turn's span")
            spans = collector.spans

    [turn] = _named(spans, "agentd.turn", **ids)
    assert turn.attributes["agentd.outcome"] == "completed"
    assert turn.service == "agentd-under-test" and not turn.failed
    rounds = _named(spans, "agentd.sampling", **ids)
    assert len(rounds) == 2  # the tool call's round and the answer's
    [call] = _named(spans, "agentd.tool_call", **ids)
    assert (
        call.attributes["agentd.tool"] == "list_dir" and call.attributes["agentd.tool_call_id"] == "call_ls"
    )
    for child in [*rounds, call]:  # nested in the turn's trace
        assert child.trace_id == turn.trace_id
    assert {r.parent_span_id for r in rounds} == {turn.span_id} and call.parent_span_id == turn.span_id
    commits = [s for s in spans if s.name == "agentd.commit" and sid in s.attributes["agentd.session_ids"]]
    assert commits and sum(int(c.attributes["agentd.events"]) for c in commits) > 0
    # The caller's trace goes on through the turn: its traceparent is the turn's parent.
    assert turn.trace_id == CALLER_TRACE and turn.parent_span_id == CALLER_SPAN
    # The turn's writes (tool call, answer) commit under it, in its trace, not as root traces.
    under_turn = [c for c in commits if c.parent_span_id == turn.span_id]
    assert under_turn and all(c.trace_id == CALLER_TRACE for c in under_turn)
    # GenAI semantic conventions on every sampling round; the first reported its usage and model.
    for r in rounds:
        assert r.attributes["gen_ai.operation.name"] == "chat"
        assert r.attributes["gen_ai.system"] == r.attributes["gen_ai.provider.name"] == "scripted"
        assert r.attributes["gen_ai.request.model"]
    tool_round, answer_round = sorted(
        rounds, key=lambda r: r.attributes["gen_ai.response.finish_reasons"] != ["tool_use"]
    )
    assert tool_round.attributes["gen_ai.response.finish_reasons"] == ["tool_use"]
    assert answer_round.attributes["gen_ai.response.finish_reasons"] == ["end_turn"]
    assert tool_round.attributes["gen_ai.response.model"] == "m-2026"
    assert tool_round.attributes["gen_ai.usage.input_tokens"] == 120
    assert tool_round.attributes["gen_ai.usage.output_tokens"] == 7
    assert tool_round.attributes["gen_ai.usage.cache_read.input_tokens"] == 30
    assert tool_round.attributes["gen_ai.usage.cache_creation.input_tokens"] == 5
