"""How a flat typed update maps to its stored payload: one field, one key, in order.

A `Flat` update names its fields' wire keys once (`_keys`, in the stored order); fields in
`_optional` are left out while None. Reading a payload back is strict — an unknown key, a
missing one or a value of the wrong JSON type raises — so the codec can fall back to keeping
an unfamiliar stored payload as it is (`agentd/core/codec.py`) rather than lose part of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self

from agentd.core.kinds import EventKind

# A JSON value as stored (what orjson writes and reads back).
Json = Any


class BadPayload(ValueError):
    """A stored payload that is not this update's shape."""


def expect(value: object, kind: type | tuple[type, ...], key: str) -> Any:
    """`value` if it is a `kind`, else `BadPayload` naming the key (bool is not an int here)."""
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise BadPayload(f"{key}: expected {kind}, got a bool")
    if not isinstance(value, kind):
        raise BadPayload(f"{key}: expected {kind}, got {type(value).__name__}")
    return value


def only_keys(payload: Mapping[str, Any], keys: frozenset[str] | set[str], what: str) -> None:
    unknown = set(payload) - keys
    if unknown:
        raise BadPayload(f"{what}: unknown keys {sorted(unknown)}")


class Flat:
    """A typed update whose payload is its fields under their wire keys (see the module doc)."""

    _keys: ClassVar[Mapping[str, str]]  # field name → wire key, in the stored order
    _optional: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A payload is built for every event a turn stores (TurnEnded has 12 fields): one
        # straight-line function per class, made once, instead of a getattr per field.
        if "payload" not in cls.__dict__ and "_keys" in cls.__dict__:
            made = compiled_payload(cls._keys, cls._optional, cls.__name__)
            cls.payload = made  # type: ignore[method-assign,assignment]

    def payload(self) -> dict[str, Any]:
        return self.generic_payload()

    def generic_payload(self) -> dict[str, Any]:
        """The payload by walking `_keys` (what `compiled_payload` writes out; tests compare)."""
        out: dict[str, Any] = {}
        for field, key in self._keys.items():
            value = getattr(self, field)
            if value is None and field in self._optional:
                continue
            out[key] = value
        return out

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Self:
        only_keys(payload, set(cls._keys.values()), cls.__name__)
        values: dict[str, Any] = {}
        for field, key in cls._keys.items():
            if key in payload:
                values[field] = payload[key]
            elif field in cls._optional:
                values[field] = None
            else:
                raise BadPayload(f"{cls.__name__}: missing {key}")
        return cls(**values)


def compiled_payload(
    keys: Mapping[str, str], optional: frozenset[str], name: str = "Flat"
) -> Callable[[Any], dict[str, Any]]:
    """`Flat.generic_payload` for these keys as one function: a dict display of the required
    fields, then each optional one added when not None (same keys, same order). Its code is
    named after the class (`<payload of NAME>`), so profiles count each class's apart."""
    lines = ["def payload(self):", "    out = {}"]
    for field, key in keys.items():
        if not field.isidentifier():
            raise ValueError(f"not a field name: {field!r}")
        if field in optional:
            lines += [f"    v = self.{field}", "    if v is not None:", f"        out[{key!r}] = v"]
        else:
            lines.append(f"    out[{key!r}] = self.{field}")
    lines.append("    return out")
    namespace: dict[str, Any] = {}
    # (source built above from identifiers and repr()ed keys)
    exec(compile("\n".join(lines), f"<payload of {name}>", "exec"), namespace)
    fn: Callable[[Any], dict[str, Any]] = namespace["payload"]
    return fn


class Unparsed:
    """A stored payload no typed update reads back exactly (an older server's shape): kept
    as it is, so it replays and re-encodes to the same bytes."""

    __slots__ = ("_data", "_kind")

    def __init__(self, kind: EventKind, data: Mapping[str, Json]) -> None:
        self._kind = kind
        self._data = data

    @property
    def kind(self) -> EventKind:
        return self._kind

    def payload(self) -> dict[str, Any]:
        return dict(self._data)

    def __repr__(self) -> str:
        return f"Unparsed({self._kind!r}, {self._data!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unparsed) and (self._kind, self._data) == (other._kind, other._data)

    __hash__ = None  # type: ignore[assignment]
