"""The public names of `agentd.demo`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.demo.run import run_demo as run_demo

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "run_demo": "agentd.demo.run",
}


__all__ = [
    "run_demo",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)
