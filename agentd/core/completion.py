"""A completion requirement (R-L2b): part of an agent definition, enforced by the loop."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CompletionRequirement:
    """A tool that must be called before a turn may complete (R-L2b), and the recovery pacing:
    after a completion without it, wait `delay_s(n)` before recovery round n (1-based)."""

    tool: str
    max_retries: int = 3
    base_delay_ms: int = 500
    max_delay_ms: int = 8000

    def delay_s(self, attempt: int) -> float:
        """`min(base·2^(attempt-1), max)` in seconds; `attempt` is 1-based."""
        if attempt < 1:
            raise ValueError(f"attempt is 1-based, got {attempt}")
        delay_ms: int = min(self.base_delay_ms * 2 ** (attempt - 1), self.max_delay_ms)
        return delay_ms / 1000
