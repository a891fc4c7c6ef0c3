"""The public names of `agentd.tools.shell`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.tools.shell.background import TaskOutput as TaskOutput
    from agentd.tools.shell.bash import Bash as Bash
    from agentd.tools.shell.egress_policy import EgressPolicy as EgressPolicy
    from agentd.tools.shell.egress_policy import IpAddress as IpAddress
    from agentd.tools.shell.egress_policy import Refusal as Refusal
    from agentd.tools.shell.egress_policy import parse_allowed as parse_allowed
    from agentd.tools.shell.launch import ShellLauncher as ShellLauncher
    from agentd.tools.shell.launch import paths_under_tmp as paths_under_tmp
    from agentd.tools.shell.proctrack import kill_all_now as kill_all_now
    from agentd.tools.shell.proctrack import new_tag as new_tag
    from agentd.tools.shell.proctrack import tagged_env as tagged_env
    from agentd.tools.shell.sandbox import SandboxMode as SandboxMode
    from agentd.tools.shell.wait_tool import Wait as Wait

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "Bash": "agentd.tools.shell.bash",
    "EgressPolicy": "agentd.tools.shell.egress_policy",
    "IpAddress": "agentd.tools.shell.egress_policy",
    "kill_all_now": "agentd.tools.shell.proctrack",
    "new_tag": "agentd.tools.shell.proctrack",
    "parse_allowed": "agentd.tools.shell.egress_policy",
    "paths_under_tmp": "agentd.tools.shell.launch",
    "Refusal": "agentd.tools.shell.egress_policy",
    "SandboxMode": "agentd.tools.shell.sandbox",
    "ShellLauncher": "agentd.tools.shell.launch",
    "tagged_env": "agentd.tools.shell.proctrack",
    "TaskOutput": "agentd.tools.shell.background",
    "Wait": "agentd.tools.shell.wait_tool",
}


__all__ = [
    "Bash",
    "EgressPolicy",
    "IpAddress",
    "Refusal",
    "SandboxMode",
    "ShellLauncher",
    "TaskOutput",
    "Wait",
    "kill_all_now",
    "new_tag",
    "parse_allowed",
    "paths_under_tmp",
    "tagged_env",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)
