"""`Event`'s attributes (issue 32): `kind` and `durable` are set once, at construction;
`payload` and `data` are made on first read, the payload dict once for both; and the
dataclass's equality, `replace` and copying behave as before."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import orjson
import pytest

from agentd.core import AgentTextChunk, Event, EventKind, Notice


class _CountingNotice(Notice):
    calls = 0

    def payload(self) -> dict[str, Any]:
        type(self).calls += 1
        return super().payload()


def test_kind_and_durable_are_plain_attributes() -> None:
    durable = Event("s1", Notice("hi"), seq=3)
    transient = Event("s1", AgentTextChunk("m1", "x", 0, thought=True))
    assert durable.kind is EventKind.NOTICE and durable.durable
    assert transient.kind is EventKind.AGENT_THOUGHT_CHUNK and not transient.durable
    assert {"kind", "durable"} <= vars(durable).keys()  # no property runs on a read


def test_payload_and_data_are_made_once_from_one_payload_dict() -> None:
    _CountingNotice.calls = 0
    event = Event("s1", _CountingNotice("hi"), seq=1)
    assert "data" not in vars(event) and "payload" not in vars(event)  # nothing made up front
    data = event.data
    assert data == orjson.dumps({"severity": "warning", "title": "hi"})
    assert event.payload == {"severity": "warning", "title": "hi"}
    assert event.data is data
    assert _CountingNotice.calls == 1  # data and payload share the one dict


def test_payload_first_then_data() -> None:
    _CountingNotice.calls = 0
    event = Event("s1", _CountingNotice("hi"))
    payload = event.payload
    assert event.data == orjson.dumps(payload)
    assert _CountingNotice.calls == 1


def test_any_other_missing_attribute_is_an_attribute_error() -> None:
    event = Event("s1", Notice("hi"))
    with pytest.raises(AttributeError):
        event.nothing  # type: ignore[attr-defined]  # noqa: B018
    assert not hasattr(event, "__setstate__") or callable(event.__setstate__)


def test_equality_replace_and_copy_are_the_dataclass_ones() -> None:
    event = Event("s1", Notice("hi"), seq=2, origin="c1")
    _ = event.data  # a cached encoding does not change equality
    assert event == Event("s1", Notice("hi"), seq=2, origin="c1")
    assert event != Event("s1", Notice("hi"), seq=3, origin="c1")
    moved = dataclasses.replace(event, origin="c2")
    assert moved.origin == "c2" and moved.seq == 2 and moved.kind is EventKind.NOTICE and moved.durable
    assert copy.copy(event) == event and copy.deepcopy(event) == event
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.seq = 5  # type: ignore[misc]
    assert hash(event) == hash(Event("s1", Notice("hi"), seq=2, origin="c1"))
