"""`quick_init` (agentd/core/frozen_init.py): the frozen dataclasses a turn builds get an
`__init__` writing their `__dict__`; with the module off they keep dataclasses' own. Both
give the same instances: same fields, defaults, factories, `__post_init__`, equality,
hash, repr, and still frozen."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from agentd.core import frozen_init as qi
from agentd.core.outcome import EndReason, OutcomeKind, TurnOutcome
from agentd.core.provider import TextDelta, Usage
from agentd.core.updates.messages import AgentText
from agentd.core.updates.turn import TurnEnded
from agentd.store.records import EventWrite


def _define(enabled: bool, monkeypatch: pytest.MonkeyPatch) -> type:
    monkeypatch.setattr(qi, "ENABLED", enabled)

    @qi.quick_init
    @dataclasses.dataclass(frozen=True)
    class Sample:
        a: int
        b: str = "b"
        c: list[int] = dataclasses.field(default_factory=list)
        d: int = dataclasses.field(default=7, init=False)
        e: dict[str, int] = dataclasses.field(default_factory=dict, init=False, compare=False)
        k: float = dataclasses.field(default=1.5, kw_only=True)
        seen: list[str] = dataclasses.field(default_factory=list, init=False, compare=False, repr=False)

        def __post_init__(self) -> None:
            self.seen.append("post")

    return Sample


@pytest.mark.parametrize("enabled", [True, False], ids=["quick", "dataclasses"])
def test_same_instances_either_way(enabled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    general = _define(False, monkeypatch)
    made = _define(enabled, monkeypatch)
    assert (made.__init__ is general.__init__) is False  # each class its own
    assert str(inspect.signature(made)) == str(inspect.signature(general))
    for args, kwargs in [((1,), {}), ((1, "x", [2]), {"k": 2.5}), ((), {"a": 3, "c": [4]})]:
        x: Any = made(*args, **kwargs)
        y: Any = general(*args, **kwargs)
        assert vars(x) == vars(y)
        assert repr(x).replace(made.__qualname__, "S") == repr(y).replace(general.__qualname__, "S")
        assert x.seen == ["post"]
        with pytest.raises(dataclasses.FrozenInstanceError):
            x.a = 2
    # factories: a fresh list per instance
    assert made(1).c is not made(1).c
    with pytest.raises(TypeError):
        made(1, "x", [], 2.0)  # k is keyword-only


def test_the_quick_init_is_in_place_only_when_enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    quick = _define(True, monkeypatch)
    general = _define(False, monkeypatch)
    assert quick.__init__.__code__.co_filename == "<string>"
    assert "__dict__" in quick.__init__.__code__.co_names
    assert "__dict__" not in general.__init__.__code__.co_names


def test_the_hot_classes_have_it_and_behave() -> None:
    for cls in (TextDelta, Usage, EventWrite, AgentText, TurnEnded, TurnOutcome):
        assert "__dict__" in cls.__init__.__code__.co_names, cls
    assert Usage(1, 2) == Usage(input_tokens=1, output_tokens=2)
    assert hash(TextDelta("a")) == hash(TextDelta(text="a"))
    outcome = TurnOutcome(OutcomeKind.CANCELLED, reason="user_cancelled")
    assert outcome.reason is EndReason.USER_CANCELLED  # __post_init__ parsed it
    assert outcome.turn == {} and outcome.turn is not TurnOutcome(OutcomeKind.COMPLETED).turn
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcome.tools_called = 1  # type: ignore[misc]


def test_a_class_with_slots_keeps_its_own_init() -> None:
    @qi.quick_init
    @dataclasses.dataclass(frozen=True, slots=True)
    class Slotted:
        a: int

    assert "__dict__" not in Slotted.__init__.__code__.co_names
    assert Slotted(1).a == 1
