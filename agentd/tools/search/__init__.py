"""The public names of `agentd.tools.search`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.tools.search.grep import Glob as Glob
    from agentd.tools.search.grep import Grep as Grep
    from agentd.tools.search.listdir import LIST_MAX_ENTRIES as LIST_MAX_ENTRIES
    from agentd.tools.search.listdir import ListDir as ListDir

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "Glob": "agentd.tools.search.grep",
    "Grep": "agentd.tools.search.grep",
    "LIST_MAX_ENTRIES": "agentd.tools.search.listdir",
    "ListDir": "agentd.tools.search.listdir",
}


__all__ = [
    "LIST_MAX_ENTRIES",
    "Glob",
    "Grep",
    "ListDir",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)
