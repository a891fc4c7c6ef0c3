"""OpenTelemetry traces (issue 15 item 6): with the standard `OTEL_*` variables set, a real
`agentd serve` exports — through the official OTLP/HTTP exporter, to a local collector — a
span per turn, per sampling round, per tool call and per commit, carrying the session and
turn ids, the rounds and tool calls nested under their turn. Without the variables it
exports nothing and never loads the SDK (tests/unit/core/test_tracing.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.client import WsClient, text_prompt
from tests.support.fakes.otlp_collector import CollectedSpan, FakeCollector
from tests.support.polling import until
from tests.support.proc import agentd_serve, write_script
from tests.support.session import new_session, tool_call

pytestmark = pytest.mark.timeout(120)


def _named(spans: list[CollectedSpan], name: str, **attrs: str) -> list[CollectedSpan]:
    return [s for s in spans if s.name == name and all(s.attributes.get(k) == v for k, v in attrs.items())]


async def test_a_turn_exports_nested_spans_with_session_and_turn_ids(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = [{"tool_calls": [tool_call("list_dir", "call_ls", path=".")]}, {"text": "listed"}]
    script = write_script(tmp_path / "script.json", steps, loop=False)
    async with FakeCollector() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # export within 50 ms, not 5 s
        monkeypatch.setenv("OTEL_SERVICE_NAME", "agentd-under-test")
        async with agentd_serve(tmp_path / "home", script=str(script)) as server:
            client = await WsClient.connect(server.base_url)
            sid = await new_session(client, workspace)
            done = await client.request("session/prompt", text_prompt(sid, "list it"))
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
