"""The public names of `agentd.tools`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentd._faces import lazy_face

if TYPE_CHECKING:
    from agentd.tools.agent_tasks import AgentTasks as AgentTasks
    from agentd.tools.base import Access as Access
    from agentd.tools.base import Tool as Tool
    from agentd.tools.base import ToolContext as ToolContext
    from agentd.tools.base import ToolKind as ToolKind
    from agentd.tools.base import ToolResult as ToolResult
    from agentd.tools.client_bridge import ClientBridge as ClientBridge
    from agentd.tools.errors import ToolError as ToolError
    from agentd.tools.files.safefs import parent_dir as parent_dir
    from agentd.tools.files.safefs import read_existing as read_existing
    from agentd.tools.files.safefs import replace_atomically as replace_atomically
    from agentd.tools.hooks import PROMPT_DECISIONS as PROMPT_DECISIONS
    from agentd.tools.hooks import HookDecision as HookDecision
    from agentd.tools.hooks import HooksConfig as HooksConfig
    from agentd.tools.hooks import HookVerdict as HookVerdict
    from agentd.tools.hooks import PreToolHook as PreToolHook
    from agentd.tools.hooks import PromptHook as PromptHook
    from agentd.tools.hooks import StopHook as StopHook
    from agentd.tools.hooks import StopHookLimits as StopHookLimits
    from agentd.tools.hooks import load_hooks as load_hooks
    from agentd.tools.hooks import parse_verdict as parse_verdict
    from agentd.tools.mcp.client import McpConnections as McpConnections
    from agentd.tools.mcp.client import McpError as McpError
    from agentd.tools.mcp.client import parse_specs as parse_specs
    from agentd.tools.mcp.policy import check_mcp_specs as check_mcp_specs
    from agentd.tools.permissions import PERMISSION_OPTIONS as PERMISSION_OPTIONS
    from agentd.tools.permissions import Decision as Decision
    from agentd.tools.permissions import Remembered as Remembered
    from agentd.tools.permissions import decide as decide
    from agentd.tools.permissions import plan_gate_refuses as plan_gate_refuses
    from agentd.tools.permissions import plan_mode_refuses as plan_mode_refuses
    from agentd.tools.registry import BUILTIN_TOOLS as BUILTIN_TOOLS
    from agentd.tools.registry import builtin_tools as builtin_tools
    from agentd.tools.registry import system_prompt_guidance as system_prompt_guidance
    from agentd.tools.search.walk import Walk as Walk
    from agentd.tools.search.walk import ignore_rules as ignore_rules
    from agentd.tools.shell.background import MAX_WAIT as MAX_WAIT
    from agentd.tools.shell.background import BackgroundTasks as BackgroundTasks
    from agentd.tools.shell.egress_policy import parse_allowed as parse_allowed
    from agentd.tools.shell.launch import Launch as Launch
    from agentd.tools.shell.launch import ShellLauncher as ShellLauncher
    from agentd.tools.shell.launch import probe_bwrap as probe_bwrap
    from agentd.tools.shell.proctrack import new_tag as new_tag
    from agentd.tools.shell.sandbox import SandboxError as SandboxError
    from agentd.tools.shell.sandbox import resolve_sandbox as resolve_sandbox
    from agentd.tools.todo import TodoList as TodoList
    from agentd.tools.web.policy import build_fetch_policy as build_fetch_policy
    from agentd.tools.web.tool import FetchLimits as FetchLimits
    from agentd.tools.web.tool import WebFetch as WebFetch

# The public names, each loaded from its module on first use (PEP 562): importing the package
# costs nothing, so a started server loads only what it runs.
_WHERE = {
    "Access": "agentd.tools.base",
    "AgentTasks": "agentd.tools.agent_tasks",
    "BackgroundTasks": "agentd.tools.shell.background",
    "build_fetch_policy": "agentd.tools.web.policy",
    "BUILTIN_TOOLS": "agentd.tools.registry",
    "builtin_tools": "agentd.tools.registry",
    "check_mcp_specs": "agentd.tools.mcp.policy",
    "ClientBridge": "agentd.tools.client_bridge",
    "decide": "agentd.tools.permissions",
    "Decision": "agentd.tools.permissions",
    "FetchLimits": "agentd.tools.web.tool",
    "HookDecision": "agentd.tools.hooks",
    "HooksConfig": "agentd.tools.hooks",
    "HookVerdict": "agentd.tools.hooks",
    "ignore_rules": "agentd.tools.search.walk",
    "Launch": "agentd.tools.shell.launch",
    "load_hooks": "agentd.tools.hooks",
    "MAX_WAIT": "agentd.tools.shell.background",
    "McpConnections": "agentd.tools.mcp.client",
    "McpError": "agentd.tools.mcp.client",
    "new_tag": "agentd.tools.shell.proctrack",
    "parent_dir": "agentd.tools.files.safefs",
    "parse_allowed": "agentd.tools.shell.egress_policy",
    "parse_specs": "agentd.tools.mcp.client",
    "parse_verdict": "agentd.tools.hooks",
    "PERMISSION_OPTIONS": "agentd.tools.permissions",
    "plan_gate_refuses": "agentd.tools.permissions",
    "plan_mode_refuses": "agentd.tools.permissions",
    "PreToolHook": "agentd.tools.hooks",
    "probe_bwrap": "agentd.tools.shell.launch",
    "PROMPT_DECISIONS": "agentd.tools.hooks",
    "PromptHook": "agentd.tools.hooks",
    "read_existing": "agentd.tools.files.safefs",
    "Remembered": "agentd.tools.permissions",
    "replace_atomically": "agentd.tools.files.safefs",
    "resolve_sandbox": "agentd.tools.shell.sandbox",
    "SandboxError": "agentd.tools.shell.sandbox",
    "ShellLauncher": "agentd.tools.shell.launch",
    "StopHook": "agentd.tools.hooks",
    "StopHookLimits": "agentd.tools.hooks",
    "system_prompt_guidance": "agentd.tools.registry",
    "TodoList": "agentd.tools.todo",
    "Tool": "agentd.tools.base",
    "ToolContext": "agentd.tools.base",
    "ToolError": "agentd.tools.errors",
    "ToolKind": "agentd.tools.base",
    "ToolResult": "agentd.tools.base",
    "Walk": "agentd.tools.search.walk",
    "WebFetch": "agentd.tools.web.tool",
}


__all__ = [
    "BUILTIN_TOOLS",
    "MAX_WAIT",
    "PERMISSION_OPTIONS",
    "PROMPT_DECISIONS",
    "Access",
    "AgentTasks",
    "BackgroundTasks",
    "ClientBridge",
    "Decision",
    "FetchLimits",
    "HookDecision",
    "HookVerdict",
    "HooksConfig",
    "Launch",
    "McpConnections",
    "McpError",
    "PreToolHook",
    "PromptHook",
    "Remembered",
    "SandboxError",
    "ShellLauncher",
    "StopHook",
    "StopHookLimits",
    "TodoList",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolKind",
    "ToolResult",
    "Walk",
    "WebFetch",
    "build_fetch_policy",
    "builtin_tools",
    "check_mcp_specs",
    "decide",
    "ignore_rules",
    "load_hooks",
    "new_tag",
    "parent_dir",
    "parse_allowed",
    "parse_specs",
    "parse_verdict",
    "plan_gate_refuses",
    "plan_mode_refuses",
    "probe_bwrap",
    "read_existing",
    "replace_atomically",
    "resolve_sandbox",
    "system_prompt_guidance",
]

__getattr__, __dir__ = lazy_face(globals(), _WHERE)
