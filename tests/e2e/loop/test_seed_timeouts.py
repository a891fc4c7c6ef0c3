"""Issue 30 item 9: octos' stream timeouts with a per-call maximum, over a real server."""

from __future__ import annotations

from pathlib import Path

from agentd.infra.config import Settings
from tests.support.client import text_prompt
from tests.support.server import scripted
from tests.support.session import events, served_session


async def test_a_model_call_past_its_maximum_is_a_timeout_and_retried(server_factory, workspace: Path):
    """003: "first-token grace 180s、stream idle 90s、LLM call max 1200s" — a call that keeps
    streaming past the per-call maximum is cut as a `timeout` and retried (the maximum is
    lowered here; the stream keeps sending, so neither the first-token nor the idle timeout
    can fire)."""
    defaults = Settings()
    assert (defaults.first_token_timeout_s, defaults.stream_idle_timeout_s) == (180.0, 90.0)
    provider = scripted(
        {"text": "slow " * 400, "chunk_size": 5, "chunk_delay": 0.05},
        {"text": "a quick answer"},
    )
    limits = {"retry": {"call_max_s": 0.5, "backoff_base_s": 0.01, "jitter": 0.0}}
    async with served_session(server_factory, workspace, provider, limits=limits) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "hello"))

        assert result["stopReason"] == "end_turn"
        retries = events(client, sid, "retry")
        assert [(r["bucket"], r["decision"]) for r in retries] == [("timeout", "continue")]
        assert "maximum of 0.5s" in retries[0]["error"]["message"]
        assert len(provider.requests) == 2
