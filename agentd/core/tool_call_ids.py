"""The toolCallIds a session has used on the wire, and the next free suffix for a reused one.

Some OpenAI-compatible servers answer `call_0` at every step; the loop renames a reused id
to `call_0_2`, `call_0_3`, … (the first free). Walking those suffixes from 2 on every call
made a tool call's cost grow with the session's history, so the set remembers, per reused
id, how far the suffixes are known to be taken. The hint is only ever a lower bound of the
first free suffix: the set grows in use, and any operation that removes ids drops the hints.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from typing import Any, Self


class ToolCallIds(set[str]):
    """A set of ids with `first_free_suffix` (see the module doc)."""

    def __init__(self, ids: Iterable[str] = ()) -> None:
        super().__init__(ids)
        # id -> n: `id_2` … `id_{n-1}` are all in the set.
        self._taken_below: dict[str, int] = {}

    def first_free_suffix(self, call_id: str) -> int:
        """The least n ≥ 2 with `f"{call_id}_{n}"` not in the set."""
        n = self._taken_below.get(call_id, 2)
        while f"{call_id}_{n}" in self:
            n += 1
        self._taken_below[call_id] = n
        return n

    # -- removals: the hints may no longer hold

    def remove(self, element: str) -> None:
        self._taken_below.clear()
        super().remove(element)

    def discard(self, element: object) -> None:
        self._taken_below.clear()
        super().discard(element)

    def pop(self) -> str:
        self._taken_below.clear()
        return super().pop()

    def clear(self) -> None:
        self._taken_below.clear()
        super().clear()

    def difference_update(self, *others: Iterable[Any]) -> None:
        self._taken_below.clear()
        super().difference_update(*others)

    def intersection_update(self, *others: Iterable[Any]) -> None:
        self._taken_below.clear()
        super().intersection_update(*others)

    def symmetric_difference_update(self, other: Iterable[str]) -> None:
        self._taken_below.clear()
        super().symmetric_difference_update(other)

    def __isub__(self, other: AbstractSet[object]) -> Self:
        self._taken_below.clear()
        return super().__isub__(other)

    def __iand__(self, other: AbstractSet[object]) -> Self:
        self._taken_below.clear()
        return super().__iand__(other)

    def __ixor__(self, other: AbstractSet[str]) -> Self:  # type: ignore[override,misc]
        self._taken_below.clear()
        return super().__ixor__(other)

    def __copy__(self) -> ToolCallIds:
        return ToolCallIds(self)  # its own hints (shared ones could outlive a removal)

    def copy(self) -> ToolCallIds:
        return ToolCallIds(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (ToolCallIds, (list(self),))
