"""The lazy face every `agentd` package's `__init__` is (PEP 562): a public name is imported
from its module on first use, so importing a package costs nothing and a started server loads
only what it runs. The package lists its names in `__all__`, says where each lives in
`_WHERE`, re-exports them under `TYPE_CHECKING` for the type checker, and ends with
`__getattr__, __dir__ = lazy_face(globals(), _WHERE)`."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

__all__ = ["lazy_face"]


def lazy_face(
    namespace: MutableMapping[str, Any], where: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The package's module-level `__getattr__` and `__dir__` over `where` (name → module)."""

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *namespace.get("__all__", ())})

    return __getattr__, __dir__
