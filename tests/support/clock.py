"""A wall clock a test moves by hand (no sleeping): for state that ages, like retry buckets."""

from __future__ import annotations

START = 1_800_000_000.0  # an arbitrary epoch second (2027-01-15)
DAY = 86_400.0


class FakeClock:
    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
