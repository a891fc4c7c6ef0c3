"""The usage ledger (R-R3, R-R4): tokens and cost per prompt and per session, attributed
to the provider lane that spent them — discarded attempts included. When a call's final
usage could not be read (cancelled, timed out, cut), the ledger is marked *dirty* instead
of silently under-counting."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentd.core import Usage


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0

    def cost(self, u: Usage) -> float:
        return (
            u.input_tokens * self.input
            + u.output_tokens * self.output
            + u.cache_read_tokens * self.cache_read
            + u.cache_write_tokens * self.cache_write
        ) / 1_000_000


@dataclass
class UsageTotals:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float = 0.0
    calls: int = 0
    dirty: bool = False  # some call's usage could not be read

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens

    def add(self, u: Usage, cost: float) -> None:
        self.input_tokens += u.input_tokens
        self.output_tokens += u.output_tokens
        self.cache_read_tokens += u.cache_read_tokens
        self.cache_write_tokens += u.cache_write_tokens
        self.cost += cost
        self.calls += 1

    def merge(self, other: UsageTotals) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.cost += other.cost
        self.calls += other.calls
        self.dirty = self.dirty or other.dirty

    def to_dict(self) -> dict[str, Any]:
        return {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "cacheReadTokens": self.cache_read_tokens,
            "cacheWriteTokens": self.cache_write_tokens,
            "totalTokens": (  # `total_tokens`, spelled out: one call less per ledger and lane
                self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens
            ),
            # (round(0.0, 6) is 0.0: no call for the common cost-free lane)
            "cost": round(self.cost, 6) if self.cost else self.cost,
            "calls": self.calls,
            "dirty": self.dirty,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> UsageTotals:
        return cls(*_wire_fields(d))

    def add_wire(self, d: dict[str, Any]) -> None:
        """`self.merge(UsageTotals.from_dict(d))` without the object in between."""
        i, o, cr, cw, cost, calls, dirty = _wire_fields(d)
        self.input_tokens += i
        self.output_tokens += o
        self.cache_read_tokens += cr
        self.cache_write_tokens += cw
        self.cost += cost
        self.calls += calls
        self.dirty = self.dirty or dirty


def _wire_fields(d: dict[str, Any]) -> tuple[int, int, int, int, float, int, bool]:
    """A record's fields as `UsageTotals.to_dict` wrote them (missing keys: zero)."""
    try:  # what to_dict wrote: every key there, read without a .get call each
        return (
            int(d["inputTokens"]),
            int(d["outputTokens"]),
            int(d["cacheReadTokens"]),
            int(d["cacheWriteTokens"]),
            float(d["cost"]),
            int(d["calls"]),
            bool(d["dirty"]),
        )
    except KeyError:
        pass
    return (
        int(d.get("inputTokens", 0)),
        int(d.get("outputTokens", 0)),
        int(d.get("cacheReadTokens", 0)),
        int(d.get("cacheWriteTokens", 0)),
        float(d.get("cost", 0.0)),
        int(d.get("calls", 0)),
        bool(d.get("dirty", False)),
    )


@dataclass
class UsageLedger:
    total: UsageTotals = field(default_factory=UsageTotals)
    by_lane: dict[str, UsageTotals] = field(default_factory=dict)

    def record(self, lane: str, usage: Usage | None, price: Price | None = None) -> None:
        """One provider call on `lane`; `usage` None when it could not be read."""
        lane_totals = self.by_lane.get(lane)
        if lane_totals is None:  # (not `setdefault(lane, UsageTotals())`: one built per call)
            lane_totals = self.by_lane[lane] = UsageTotals()
        if usage is None:
            lane_totals.dirty = True
            self.total.dirty = True
            lane_totals.calls += 1
            self.total.calls += 1
            return
        cost = price.cost(usage) if price else 0.0
        lane_totals.add(usage, cost)
        self.total.add(usage, cost)

    def merge(self, other: UsageLedger) -> None:
        t = other.total
        nothing = not (t.calls or t.dirty or t.cost or t.input_tokens or t.output_tokens)
        if nothing and not (other.by_lane or t.cache_read_tokens or t.cache_write_tokens):
            return  # an empty ledger (a turn without sub-agents): adds nothing
        self.total.merge(t)
        for lane, totals in other.by_lane.items():
            mine = self.by_lane.get(lane)
            if mine is None:
                mine = self.by_lane[lane] = UsageTotals()
            mine.merge(totals)

    def merge_wire(self, d: dict[str, Any] | None) -> None:
        """`self.merge(UsageLedger.from_dict(d))` without building that ledger: a turn's
        usage, as its summary wrote it, joins the session's ledger once per turn."""
        if not d:
            return
        self.total.add_wire(d)
        if by_lane := d.get("byLane"):
            for lane, totals in by_lane.items():
                mine = self.by_lane.get(lane)
                if mine is None:
                    mine = self.by_lane[lane] = UsageTotals()
                mine.add_wire(totals)

    def to_dict(self) -> dict[str, Any]:
        # One record's shape, `UsageTotals.to_dict`, for the total and each lane (a copy
        # written out here saved a call per lane and drifted from it: not worth two copies).
        d = self.total.to_dict()
        # A loop, not a dict comprehension: the comprehension is a call of its own, and this
        # runs three times a turn (the usage event, the turn summary, the turn's end).
        lanes = d["byLane"] = {}
        for lane, t in self.by_lane.items():
            lanes[lane] = t.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> UsageLedger:
        if not d:
            return cls()
        lanes: dict[str, UsageTotals] = {}
        if by_lane := d.get("byLane"):
            for lane, totals in by_lane.items():
                lanes[lane] = UsageTotals.from_dict(totals)
        return cls(UsageTotals.from_dict(d), lanes)
