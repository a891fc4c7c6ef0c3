"""R-O: Prometheus metrics at `/metrics` — sessions, clients, turns by outcome, retry
decisions, event fan-out lag and the event log's flush latency."""

from __future__ import annotations

from pathlib import Path

import httpx

from agentd.core import TurnEnded
from agentd.infra.auth import create_token
from agentd.infra.config import AuthMode
from tests.support.client import text_prompt
from tests.support.metrics import samples, scrape
from tests.support.server import scripted


async def test_metrics_count_sessions_turns_retries_and_time_the_log(server_factory, workspace: Path) -> None:
    provider = scripted(
        {"error": {"kind": "rate_limited", "message": "slow down", "retry_after": 0.01}},
        {"text": "answered after a retry"},
        {"text": "second answer"},
    )
    async with server_factory(provider) as server:
        before = await scrape(server.base_url)
        assert before[("agentd_sessions_live", ())] == 0
        assert before.get(("agentd_turns_total", (("outcome", "completed"),)), 0) == 0

        client = await server.client()
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        await client.call("session/prompt", text_prompt(sid, "one"))
        await client.call("session/prompt", text_prompt(sid, "two"))
        after = await scrape(server.base_url)
        assert after[("agentd_sessions_live", ())] == 1
        assert after[("agentd_clients_attached", ())] == 1
        assert after[("agentd_turns_running", ())] == 0
        assert after[("agentd_turns_total", (("outcome", "completed"),))] == 2
        retried = {labels: v for (name, labels), v in after.items() if name == "agentd_retry_decisions_total"}
        assert retried == {(("bucket", "rate_limited"), ("decision", "continue")): 1}  # retried, went on
        assert after[("agentd_events_total", ())] >= 10
        # Every durable event was committed and delivered: both latencies were measured.
        assert after[("agentd_db_flush_seconds_count", ())] >= 1
        assert after[("agentd_event_fanout_lag_seconds_count", ())] >= after[("agentd_events_total", ())]
        await client.close()


async def test_metrics_need_a_token_when_auth_is_on(server_factory) -> None:
    async with server_factory(scripted(), auth=AuthMode.TOKEN) as server:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=10) as http:
            assert (await http.get("/metrics")).status_code == 401
        token, _ = await create_token(server.app.state.agentd.store, "prometheus")
        got = await scrape(server.base_url, Authorization=f"Bearer {token}")
        assert ("agentd_sessions_live", ()) in got


def test_a_client_dropped_for_falling_behind_is_counted() -> None:
    from agentd.core.events import Event, EventKind
    from agentd.infra.metrics import Metrics
    from agentd.session.eventlog.hub import EventHub
    from agentd.transport.render import ACP_RENDERER

    class FullSink:
        id = "slow"

        def send_notification(self, method: str, params: dict) -> bool:
            return False  # its buffer is full

    metrics = Metrics()
    hub = EventHub(render=ACP_RENDERER, on_drop=metrics.resyncs.inc)
    hub.subscribe(FullSink(), "s1").go_live(0)
    hub.publish(Event.stored("s1", EventKind.MODE_CHANGED, {"modeId": "plan"}, seq=1))
    assert len(hub) == 0
    assert samples(metrics.render().decode())[("agentd_client_resyncs_total", ())] == 1


async def test_what_happens_before_the_first_scrape_is_counted(server_factory, workspace: Path) -> None:
    """The instruments (and prometheus_client) are made at the first observation, not at
    start-up (agentd/infra/metrics.py): a server scraped only after its first turns counts them all."""
    async with server_factory(scripted({"text": "one"}, {"text": "two"})) as server:
        assert not server.app.state.agentd.metrics.loaded  # started, nothing observed yet
        client = await server.client()
        sid = (await client.call("session/new", {"cwd": str(workspace), "mcpServers": []}))["sessionId"]
        await client.call("session/prompt", text_prompt(sid, "one"))
        await client.call("session/prompt", text_prompt(sid, "two"))
        first = await scrape(server.base_url)
        assert first[("agentd_sessions_live", ())] == 1
        assert first[("agentd_clients_attached", ())] == 1
        assert first[("agentd_turns_total", (("outcome", "completed"),))] == 2
        assert first[("agentd_events_total", ())] >= 10
        assert first[("agentd_db_flush_seconds_count", ())] >= 1
        await client.close()


def test_the_session_gauges_work_whichever_comes_first() -> None:
    from agentd.infra.metrics import Metrics

    class Actor:
        hub = (1, 2)
        running_turn_id = "t1"
        queued = 3

    early = Metrics()  # instruments made before the gauges are told where to read
    early.observe_event(TurnEnded("turn_1", "p1", "completed", "end_turn", 0))
    early.track_sessions(lambda: [Actor()])
    late = Metrics()
    late.track_sessions(lambda: [Actor()])
    assert not late.loaded
    for m in (early, late):
        got = samples(m.render().decode())
        assert got[("agentd_sessions_live", ())] == 1
        assert got[("agentd_clients_attached", ())] == 2
        assert got[("agentd_turns_running", ())] == 1
        assert got[("agentd_prompts_queued", ())] == 3
    assert samples(early.render().decode())[("agentd_turns_total", (("outcome", "completed"),))] == 1
