"""The public names of `agentd.tools.shell`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentd.tools.shell.background import TaskOutput as TaskOutput
    from agentd.tools.shell.bash import Bash as Bash
    from agentd.tools.shell.launch import ShellLauncher as ShellLauncher
    from agentd.tools.shell.proctrack import kill_all_now as kill_all_now
    from agentd.tools.shell.proctrack import new_tag as new_tag
    from agentd.tools.shell.proctrack import tagged_env as tagged_env
    from agentd.tools.shell.sandbox import SandboxMode as SandboxMode
    from agentd.tools.shell.wait_tool import Wait as Wait

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "Bash": "agentd.tools.shell.bash",
    "SandboxMode": "agentd.tools.shell.sandbox",
    "ShellLauncher": "agentd.tools.shell.launch",
    "TaskOutput": "agentd.tools.shell.background",
    "Wait": "agentd.tools.shell.wait_tool",
    "kill_all_now": "agentd.tools.shell.proctrack",
    "new_tag": "agentd.tools.shell.proctrack",
    "tagged_env": "agentd.tools.shell.proctrack",
}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "Bash",
    "SandboxMode",
    "ShellLauncher",
    "TaskOutput",
    "Wait",
    "kill_all_now",
    "new_tag",
    "tagged_env",
]
