"""`ToolCallIds` remembers how far a reused id's suffixes are taken; the id the loop picks
with it is exactly the one a walk from `_2` over a plain set picks, whatever the set went
through (ids added in any order, removed, copied)."""

from __future__ import annotations

import copy
import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from agentd.core.conversation import ToolCall
from agentd.core.tool_call_ids import ToolCallIds
from agentd.loop.react.sampling import unique_tool_call_id

_BASE = st.sampled_from(["c", "d"])
_ID = st.one_of(_BASE, st.builds(lambda b, n: f"{b}_{n}", _BASE, st.integers(2, 5)))
_op = st.one_of(
    st.tuples(st.just("unique"), _BASE, st.lists(_ID, max_size=2)),
    st.tuples(st.just("unique"), _BASE, st.just([])),
    st.tuples(st.just("add"), _ID),
    st.tuples(st.just("discard"), _ID),
    st.tuples(st.just("isub"), st.lists(_ID, max_size=3)),
    st.tuples(st.just("iand"), st.lists(_ID, max_size=6)),
    st.tuples(st.just("ixor"), st.lists(_ID, max_size=3)),
    st.tuples(st.just("difference_update"), st.lists(_ID, max_size=3)),
    st.tuples(st.just("pop")),
    st.tuples(st.just("clear")),
    st.tuples(st.just("copy")),
)


def _walk(call_id: str, used: set[str], pending: list[ToolCall]) -> str:
    """The plain definition: the first free suffix from 2."""
    taken = used | {c.id for c in pending}
    if call_id not in taken:
        return call_id
    n = 2
    while f"{call_id}_{n}" in taken:
        n += 1
    return f"{call_id}_{n}"


@settings(max_examples=500, deadline=None)
@given(st.lists(_op, max_size=60))
def test_the_hinted_id_is_the_walked_id(ops: list[tuple]) -> None:  # type: ignore[type-arg]
    ids = ToolCallIds()
    plain: set[str] = set()
    for op in ops:
        match op:
            case ("unique", base, pending_ids):
                pending = [ToolCall(id=i, name="t") for i in pending_ids]
                chosen = unique_tool_call_id(base, ids, pending)
                assert chosen == _walk(base, plain, pending) == unique_tool_call_id(base, set(plain), pending)
                ids.add(chosen)  # as the journal does when the call is announced
                plain.add(chosen)
            case ("add", i):
                ids.add(i)
                plain.add(i)
            case ("discard", i):
                ids.discard(i)
                plain.discard(i)
            case ("isub", other):
                ids -= set(other)
                plain -= set(other)
            case ("iand", other):
                ids &= set(other)
                plain &= set(other)
            case ("ixor", other):
                ids ^= set(other)
                plain ^= set(other)
            case ("difference_update", other):
                ids.difference_update(other)
                plain.difference_update(other)
            case ("pop",) if plain:
                plain.discard(ids.pop())
            case ("clear",):
                ids.clear()
                plain.clear()
            case ("copy",):
                ids = copy.copy(ids)
        assert isinstance(ids, ToolCallIds) and ids == plain


def test_every_removal_drops_the_hints() -> None:
    removals = [
        lambda s: s.remove("c_2"),
        lambda s: s.discard("c_2"),
        lambda s: s.difference_update(["c_2"]),
        lambda s: s.intersection_update(["c", "c_3"]),
        lambda s: s.symmetric_difference_update(["c_2"]),
        lambda s: s.__isub__({"c_2"}),
        lambda s: s.__iand__({"c", "c_3"}),
        lambda s: s.__ixor__({"c_2"}),
        lambda s: s.clear(),
    ]
    for remove in removals:
        ids = ToolCallIds(["c", "c_2", "c_3"])
        assert ids.first_free_suffix("c") == 4
        remove(ids)
        assert ids.first_free_suffix("c") == 2
    ids = ToolCallIds(["c_2"])
    assert ids.first_free_suffix("c") == 3
    ids.pop()
    assert ids.first_free_suffix("c") == 2


def test_a_repeated_id_does_not_walk_its_suffixes_again() -> None:
    ids = ToolCallIds(["call_0"])
    for _ in range(500):
        ids.add(unique_tool_call_id("call_0", ids, []))
    assert "call_0_501" in ids and ids._taken_below == {"call_0": 501}
    probes: list[str] = []

    class Counting(ToolCallIds):
        def __contains__(self, item: object) -> bool:
            probes.append(str(item))
            return super().__contains__(item)

    counted = Counting(ids)
    assert unique_tool_call_id("call_0", counted, []) == "call_0_502"
    first = len(probes)
    counted.add("call_0_502")
    probes.clear()
    assert unique_tool_call_id("call_0", counted, []) == "call_0_503"
    assert len(probes) <= 4 < first  # the second look starts where the first ended


def test_copies_and_pickles_keep_their_own_hints() -> None:
    ids = ToolCallIds(["a", "a_2", "a_3"])
    assert ids.first_free_suffix("a") == 4
    other = pickle.loads(pickle.dumps(ids))
    twin = ids.copy()
    assert type(other) is ToolCallIds and type(twin) is ToolCallIds and other == ids == twin
    twin.discard("a_2")
    assert twin.first_free_suffix("a") == 2 and ids.first_free_suffix("a") == 4
