"""Every seed constant lives in one named place (`LoopLimits`): tests can read the
defaults, and an operator can override any of them (AGENTD_LIMITS)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentd.infra.config import Settings
from agentd.loop.limits import LoopLimits
from agentd.loop.retry import Bucket
from tests.support.client import text_prompt
from tests.support.server import scripted
from tests.support.session import served_session


def test_the_seed_defaults_are_visible_in_one_object():
    limits = LoopLimits()
    assert (limits.stationarity.nudge_at, limits.stationarity.stop_at, limits.stationarity.noop_stop_at) == (
        8,
        16,
        4,
    )
    assert limits.stationarity.no_progress_after == 3
    assert limits.stationarity.pattern_lengths == (20, 40, 60, 100)
    assert (limits.max_tokens.max_continuations, limits.max_tokens.max_empty_retries) == (2, 2)
    assert limits.structured.max_retries == 3
    assert limits.todo_gate.max_nudges == 2
    assert limits.compaction.threshold == 0.85
    assert limits.stop_hooks.max_reentries == 8
    assert (limits.goal.attempt_timeout_s, limits.goal.item_max_bytes, limits.goal.transcript_max_bytes) == (
        30.0,
        4096,
        32768,
    )
    assert limits.goal.blocked_repeats == 3
    assert (
        limits.budget.max_iterations,
        limits.budget.idle_progress_s,
        limits.budget.activity_timeout_s,
    ) == (
        None,
        300.0,
        1800.0,
    )
    assert limits.budget.token_budget is None
    expected = {
        "rate_limited": 5, "context_overflow": 2, "authentication": 1, "quota": 1, "invalid_request": 2,
        "content_filtered": 1, "provider_unavailable": 4, "network": 4, "timeout": 3, "tool_execution": 5,
        "mcp_spawn": 2, "mcp_timeout": 3, "mcp_protocol": 2, "delegate_depth_exceeded": 1, "internal": 1,
        "shell_spiral": 1, "degenerate_output": 3,
    }  # fmt: skip
    assert {b.value: limits.retry.limit(b) for b in Bucket} == expected
    assert limits.retry.auth_schedule_s == (2.0,)  # authentication's own schedule (000)


def test_settings_and_overrides_build_the_limits_in_force(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(
        "AGENTD_LIMITS",
        json.dumps(
            {
                "stationarity": {"stop_at": 6},
                "retry": {"bucket_limits": {"rate_limited": 9}, "auth_schedule_s": [1, 5]},
            }
        ),
    )
    monkeypatch.setenv("AGENTD_MAX_ITERATIONS", "50")
    limits = LoopLimits.from_settings(Settings())
    assert limits.stationarity.stop_at == 6
    assert limits.stationarity.nudge_at == 8  # untouched fields keep their defaults
    assert limits.retry.limit(Bucket.RATE_LIMITED) == 9
    assert limits.retry.limit(Bucket.NETWORK) == 4
    assert limits.retry.auth_schedule_s == (1.0, 5.0)
    assert limits.budget.max_iterations == 50


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"stationarty": {"stop_at": 3}}, "unknown section 'stationarty'"),
        ({"stationarity": {"stop_after": 3}}, "limits.stationarity: unknown field"),
    ],
)
def test_unknown_limits_are_refused_with_a_clear_error(overrides, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        LoopLimits().with_overrides(overrides)


async def test_an_override_changes_the_running_loop(server_factory, workspace: Path):
    # With stop_at 5 instead of 16, the fifth identical step ends the turn.
    provider = scripted({"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]}, loop=True)
    async with served_session(
        server_factory, workspace, provider, limits={"stationarity": {"stop_at": 5, "nudge_at": 3}}
    ) as (_, client, sid):
        result = await client.call("session/prompt", text_prompt(sid, "poll"))
        assert result["stopReason"] == "end_turn"
        assert result["_meta"]["agentd"]["reason"] == "identical_steps"
        assert len(provider.requests) == 5
