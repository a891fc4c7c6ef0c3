"""The public names of `agentd.tools.files`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.tools.files import safefs as safefs
    from agentd.tools.files.args import os_error as os_error
    from agentd.tools.files.args import safe_locations as safe_locations
    from agentd.tools.files.args import str_arg as str_arg
    from agentd.tools.files.kind import is_binary as is_binary
    from agentd.tools.files.preview import ToolPreview as ToolPreview
    from agentd.tools.files.safefs import parent_dir as parent_dir
    from agentd.tools.files.tools import EditFile as EditFile
    from agentd.tools.files.tools import ReadFile as ReadFile
    from agentd.tools.files.tools import WriteFile as WriteFile
    from agentd.tools.files.workspace import display_path as display_path
    from agentd.tools.files.workspace import resolve_in_workspace as resolve_in_workspace

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "display_path": "agentd.tools.files.workspace",
    "EditFile": "agentd.tools.files.tools",
    "is_binary": "agentd.tools.files.kind",
    "os_error": "agentd.tools.files.args",
    "parent_dir": "agentd.tools.files.safefs",
    "ReadFile": "agentd.tools.files.tools",
    "resolve_in_workspace": "agentd.tools.files.workspace",
    "safe_locations": "agentd.tools.files.args",
    "str_arg": "agentd.tools.files.args",
    "ToolPreview": "agentd.tools.files.preview",
    "WriteFile": "agentd.tools.files.tools",
}


__all__ = [
    "EditFile",
    "ReadFile",
    "ToolPreview",
    "WriteFile",
    "display_path",
    "is_binary",
    "os_error",
    "parent_dir",
    "resolve_in_workspace",
    "safe_locations",
    "safefs",
    "str_arg",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)
