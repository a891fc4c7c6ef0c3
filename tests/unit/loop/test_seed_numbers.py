"""Issue 30 item 10: every seed number agentd uses sits beside its seed quote, and each value
is pinned to the number its quote states — changing a default without its seed fails here."""

from __future__ import annotations

import pytest

from agentd.loop.limits import LoopLimits
from agentd.loop.seed_numbers import seed_numbers

# name → (the value the seed states, the literal text of that number in the quote)
PINNED: dict[str, tuple[float, str]] = {
    "stationarity.nudge_at": (8, "约 8 次"),
    "stationarity.stop_at": (16, "16 次"),
    "stationarity.noop_stop_at": (4, "4 次"),
    "structured.max_retries": (3, "3 次用尽"),
    "max_tokens.max_continuations": (2, "续跑 ≤2 次"),
    "max_tokens.max_empty_retries": (2, "nudge-and-retry ≤2 次"),
    "stop_hooks.max_reentries": (8, "续跑 8 次"),
    "goal.attempt_timeout_s": (30.0, "超时 30s"),
    "goal.attempts": (2, "最多试 2 次"),
    "drain.timeout_s": (5.0, "最多 5 秒"),
    "compaction.threshold": (0.85, "85 %"),
    "background.max_wait_s": (600.0, "10 分钟"),
    "loop_detector.cycle_window": (12, "窗口 12"),
    "budget.headless_max_iterations": (50, "默认 50 次"),
    "subagent.default_max_turns": (10, "max_turns = 10"),
    "settings.first_token_timeout_s": (180.0, "first-token grace 180s"),
    "settings.stream_idle_timeout_s": (90.0, "stream idle 90s"),
    "retry.call_max_s": (1200.0, "LLM call max 1200s"),
    "retry.authentication": (1, "authentication 1"),
    "retry.quota": (1, "quota 1"),
    "retry.content_filtered": (1, "content_filtered 1"),
    "retry.internal": (1, "internal 1"),
    "retry.rate_limited": (5, "rate_limited 5"),
    "retry.network": (4, "network 4"),
    "retry.provider_unavailable": (4, "provider_unavailable 4"),
    "retry.timeout": (3, "timeout 3"),
    "retry.shell_spiral": (1, "shell_spiral 只有 1"),
}

TABLE = {row.name: row for row in seed_numbers()}


def test_the_table_holds_exactly_the_pinned_numbers() -> None:
    assert set(TABLE) == set(PINNED)


@pytest.mark.parametrize("name", sorted(PINNED))
def test_each_value_is_the_number_its_quote_states(name: str) -> None:
    value, said = PINNED[name]
    row = TABLE[name]
    assert row.value == value
    assert said in row.quote
    assert row.source in {"000", "001", "003", "004", "SPEC"}


def test_the_table_reads_the_values_in_force() -> None:
    """The table is not a copy: an override shows up in it."""
    changed = LoopLimits().with_overrides({"stationarity": {"stop_at": 20}})
    rows = {row.name: row.value for row in seed_numbers(changed)}
    assert rows["stationarity.stop_at"] == 20
