"""Every seed number agentd uses, beside the seed sentence it comes from (issue 30 item 10).

The values are read from the limits actually in force by default (`LoopLimits()`, the
retry buckets, the tools' and settings' defaults), so this table cannot drift from the
code: a unit test pins each value to the number its quote states. Seeds: 000 (Grok
session loop), 001 (agentd's loop description), 003 (octos agent loop), SPEC (the spec).
"""

from __future__ import annotations

from dataclasses import dataclass

from agentd.infra import Settings
from agentd.loop.budget import BudgetLimits
from agentd.loop.limits import LoopLimits
from agentd.loop.retry import Bucket
from agentd.loop.subagents import DEFAULT_CHILD_MAX_TURNS
from agentd.tools import MAX_WAIT


@dataclass(frozen=True)
class SeedNumber:
    name: str  # where agentd uses it
    value: float
    source: str  # which seed says it
    quote: str  # the seed's sentence, verbatim


def _bucket(limits: LoopLimits, bucket: Bucket) -> float:
    return float(limits.retry.bucket_limits[bucket])


BUCKETS_QUOTE = (
    "上限刻意压低：结构性故障的桶几乎不给重试机会（authentication 1、quota 1、content_filtered 1、"
    "internal 1），瞬态故障给几次（rate_limited 5、network 4、provider_unavailable 4、timeout 3），"
    "shell_spiral 只有 1。"
)


def seed_numbers(
    limits: LoopLimits | None = None, settings: Settings | None = None
) -> tuple[SeedNumber, ...]:
    """The table, with the values in force for `limits`/`settings` (the defaults when None)."""
    lim = limits or LoopLimits()
    conf = settings or Settings()
    st = lim.stationarity
    table = [
        SeedNumber(
            "stationarity.nudge_at",
            st.nudge_at,
            "001",
            "连续相同 tool call	约 8 次	注入 nudge reminder，提示停止空转轮询",
        ),
        SeedNumber(
            "stationarity.stop_at",
            st.stop_at,
            "001",
            "连续相同 tool call	16 次	硬停：`StationarityEnded`，结束 L3",
        ),
        SeedNumber(
            "stationarity.noop_stop_at",
            st.noop_stop_at,
            "001",
            "连续 true no-op 类调用	4 次	硬停阈值更低",
        ),
        SeedNumber(
            "structured.max_retries",
            lim.structured.max_retries,
            "000",
            "StructuredOutput 假工具：schema 即参数、校验错误回填重调、3 次用尽仍 Completed",
        ),
        SeedNumber(
            "max_tokens.max_continuations",
            lim.max_tokens.max_continuations,
            "003",
            "push_max_tokens_continuation<br/>续跑 ≤2 次",
        ),
        SeedNumber(
            "max_tokens.max_empty_retries",
            lim.max_tokens.max_empty_retries,
            "003",
            "nudge-and-retry ≤2 次<br/>耗尽则终态错误",
        ),
        SeedNumber(
            "stop_hooks.max_reentries", lim.stop_hooks.max_reentries, "001", "同 turn 最多因 stop 续跑 8 次"
        ),
        SeedNumber(
            "goal.attempt_timeout_s",
            lim.goal.attempt_timeout_s,
            "001",
            "超时 30s；最多试 2 次（先小模型，失败再退到当前会话模型）",
        ),
        SeedNumber(
            "goal.attempts",
            lim.goal.attempts,
            "001",
            "超时 30s；最多试 2 次（先小模型，失败再退到当前会话模型）",
        ),
        SeedNumber(
            "drain.timeout_s", lim.drain.timeout_s, "000", "采样成功后等待最多 5 秒让事件流排空再继续"
        ),
        SeedNumber(
            "compaction.threshold",
            lim.compaction.threshold,
            "SPEC",
            "at ≥ 85 % of the model's context window",
        ),
        SeedNumber(
            "background.max_wait_s", MAX_WAIT, "000", "用户 Esc 后的新指令不必干等一个 10 分钟的后台任务轮询"
        ),
        SeedNumber(
            "loop_detector.cycle_window", lim.loop_detector.cycle_window, "003", "LoopDetector（窗口 12"
        ),
        SeedNumber(
            "budget.headless_max_iterations",
            BudgetLimits.HEADLESS_MAX_ITERATIONS,
            "003",
            "默认 50 次的迭代预算不因此提高",
        ),
        SeedNumber("subagent.default_max_turns", DEFAULT_CHILD_MAX_TURNS, "004", "max_turns = 10。"),
        SeedNumber(
            "settings.first_token_timeout_s",
            conf.first_token_timeout_s,
            "003",
            "超时与限额常量集中在 AgentConfig（first-token grace 180s、stream idle 90s、LLM call max 1200s",
        ),
        SeedNumber(
            "settings.stream_idle_timeout_s",
            conf.stream_idle_timeout_s,
            "003",
            "超时与限额常量集中在 AgentConfig（first-token grace 180s、stream idle 90s、LLM call max 1200s",
        ),
        SeedNumber(
            "retry.call_max_s",
            lim.retry.call_max_s,
            "003",
            "超时与限额常量集中在 AgentConfig（first-token grace 180s、stream idle 90s、LLM call max 1200s",
        ),
    ]
    for bucket in (
        Bucket.AUTHENTICATION,
        Bucket.QUOTA,
        Bucket.CONTENT_FILTERED,
        Bucket.INTERNAL,
        Bucket.RATE_LIMITED,
        Bucket.NETWORK,
        Bucket.PROVIDER_UNAVAILABLE,
        Bucket.TIMEOUT,
        Bucket.SHELL_SPIRAL,
    ):
        table.append(SeedNumber(f"retry.{bucket.value}", _bucket(lim, bucket), "003", BUCKETS_QUOTE))
    return tuple(table)
