"""A `Flat` update's payload is one function made per class (`compiled_payload`, issue 32);
it must give what walking `_keys` gives (`generic_payload`): the same keys, in the same order,
optional fields left out exactly while None."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

import agentd.core.updates.messages
import agentd.core.updates.session
import agentd.core.updates.tool_calls
import agentd.core.updates.turn  # noqa: F401  (every Flat subclass defined)
from agentd.core.updates.wire import Flat, compiled_payload


def _flat_classes() -> list[type[Flat]]:
    found: list[type[Flat]] = []
    todo = list(Flat.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return sorted(found, key=lambda c: c.__name__)


def test_the_flat_updates_are_found() -> None:
    names = {c.__name__ for c in _flat_classes()}
    assert {"TurnStarted", "TurnEnded", "UsageReported", "QueueChanged"} <= names


@pytest.mark.parametrize("cls", _flat_classes(), ids=lambda c: c.__name__)
def test_compiled_payload_is_the_walk(cls: type[Flat]) -> None:
    assert cls.payload is not Flat.payload  # compiled (or the class's own)
    fields = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    optional = [f for f in fields if f in cls._optional]
    # Every combination of the optional fields being None or set (required ones always set).
    for nones in itertools.product([True, False], repeat=len(optional)):
        none = {name for name, is_none in zip(optional, nones, strict=True) if is_none}
        values = {name: (None if name in none else f"v-{name}") for name in fields}
        update = cls(**values)
        got = update.payload()
        assert got == update.generic_payload()
        assert list(got) == list(update.generic_payload())  # the order is the stored bytes'
        assert list(got) == [cls._keys[f] for f in cls._keys if f not in none]


def test_a_field_name_that_is_not_an_identifier_is_refused() -> None:
    with pytest.raises(ValueError, match="not a field name"):
        compiled_payload({"a; import os": "k"}, frozenset())
