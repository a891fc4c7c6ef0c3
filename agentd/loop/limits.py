"""Every constant of the loop, in one place (issue 4 item 11).

Each decision module owns a frozen dataclass of its defaults (the seeds' numbers);
`LoopLimits` gathers them so an operator can override any of them — `AGENTD_LIMITS`
as JSON, e.g. `{"stationarity": {"stop_at": 20}, "retry": {"backoff_max_s": 30}}` — and
a test can read the values in force. Unknown sections or fields are refused at start-up.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from agentd.loop.budget import BudgetLimits
from agentd.loop.compaction import CompactionLimits
from agentd.loop.detection import LoopDetectorLimits, StationarityLimits
from agentd.loop.drain import DrainLimits
from agentd.loop.goals import GoalLimits
from agentd.loop.max_tokens import MaxTokensLimits
from agentd.loop.repair import RepairLimits
from agentd.loop.retry import Bucket, RetryLimits
from agentd.loop.structured import StructuredOutputLimits
from agentd.loop.todo_gate import TodoGateLimits
from agentd.tools import StopHookLimits

if TYPE_CHECKING:
    from agentd.infra import Settings


@dataclass(frozen=True)
class LoopLimits:
    budget: BudgetLimits = field(default_factory=BudgetLimits)
    stationarity: StationarityLimits = field(default_factory=StationarityLimits)
    loop_detector: LoopDetectorLimits = field(default_factory=LoopDetectorLimits)
    repair: RepairLimits = field(default_factory=RepairLimits)
    max_tokens: MaxTokensLimits = field(default_factory=MaxTokensLimits)
    structured: StructuredOutputLimits = field(default_factory=StructuredOutputLimits)
    todo_gate: TodoGateLimits = field(default_factory=TodoGateLimits)
    compaction: CompactionLimits = field(default_factory=CompactionLimits)
    retry: RetryLimits = field(default_factory=RetryLimits)
    goal: GoalLimits = field(default_factory=GoalLimits)
    stop_hooks: StopHookLimits = field(default_factory=StopHookLimits)
    drain: DrainLimits = field(default_factory=DrainLimits)

    @classmethod
    def from_settings(cls, settings: Settings) -> LoopLimits:
        """The seed defaults, the budget and goal settings, then `AGENTD_LIMITS` overrides."""
        base = cls(
            budget=BudgetLimits(
                max_iterations=settings.max_iterations,
                idle_progress_s=settings.idle_progress_s,
                activity_timeout_s=settings.activity_timeout_s,
                token_budget=settings.token_budget,
            ),
            goal=GoalLimits(attempt_timeout_s=settings.goal_attempt_timeout_s),
        )
        return base.with_overrides(settings.limits)

    def with_overrides(self, overrides: Mapping[str, Mapping[str, Any]]) -> LoopLimits:
        sections = {f.name for f in dataclasses.fields(self)}
        changes: dict[str, Any] = {}
        for section, values in overrides.items():
            if section not in sections:
                raise ValueError(
                    f"limits: unknown section {section!r} (one of {', '.join(sorted(sections))})"
                )
            current = getattr(self, section)
            known = {f.name for f in dataclasses.fields(current)}
            unknown = set(values) - known
            if unknown:
                names = ", ".join(sorted(known))
                raise ValueError(f"limits.{section}: unknown field(s) {sorted(unknown)} (one of {names})")
            values = dict(values)
            if section == "retry" and "bucket_limits" in values:
                values["bucket_limits"] = {Bucket(k): int(v) for k, v in values["bucket_limits"].items()}
            if section == "retry" and "auth_schedule_s" in values:
                values["auth_schedule_s"] = tuple(values["auth_schedule_s"])
            if section == "stationarity" and "pattern_lengths" in values:
                values["pattern_lengths"] = tuple(values["pattern_lengths"])
            changes[section] = dataclasses.replace(current, **values)
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The limits in force as plain JSON data (enum keys as their values)."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}


def _plain(value: Any) -> Any:
    # Not `dataclasses.asdict`: it deep-copies leaves, and the retry limits hold a
    # read-only `MappingProxyType`, which cannot be copied.
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(getattr(k, "value", k)): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return getattr(value, "value", value) if isinstance(value, Enum) else value
