"""The turn machinery's shared parts — tools, hooks, agents, loop limits, skills — and how
the composition root makes them (`build_kit`).

Importing this module loads the loop, the tools and the agent definitions. `ActorServices`
(services.py) makes its kit on first use, so a server that has not yet created or loaded a
session has none of them in memory (issue 14: idle RSS); configured files are read at
start-up all the same, so a mistake in them still stops the server at once (agentd/app.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentd.agents import DEFAULT_AGENT, AgentDefinition, default_definitions
from agentd.infra import SandboxNetwork, Settings
from agentd.loop import LoopLimits
from agentd.session.command_syntax import Skill, load_skills
from agentd.tools import HooksConfig, ShellLauncher, Tool, builtin_tools, load_hooks


@dataclass
class TurnKit:
    tools: dict[str, Tool]
    hooks: HooksConfig = field(default_factory=HooksConfig)
    agents: dict[str, AgentDefinition] = field(default_factory=lambda: {DEFAULT_AGENT.name: DEFAULT_AGENT})
    limits: LoopLimits = field(default_factory=LoopLimits)  # every loop constant in force
    skills: dict[str, Skill] = field(default_factory=dict)


def web_tools(settings: Settings) -> dict[str, Tool]:
    """`web_fetch`, unless it is turned off — or the sandbox's network is: an operator who
    cut commands off the network did not mean the model to reach it another way."""
    if not settings.web_fetch or settings.sandbox_network is SandboxNetwork.OFF:
        return {}
    from agentd.tools import FetchLimits, WebFetch, build_fetch_policy

    policy = build_fetch_policy(settings.web_fetch_allow, settings.web_fetch_deny, (settings.port,))
    limits = FetchLimits(int(settings.web_fetch_max_mb * 1024 * 1024), settings.web_fetch_timeout_s)
    return {WebFetch.name: WebFetch(policy, limits)}


def build_kit(
    settings: Settings, shell: ShellLauncher | None, tools: dict[str, Tool] | None = None
) -> TurnKit:
    """`tools` replace the built-in set (embedding, tests); `shell`: how `bash` starts commands."""
    tools_in_use = tools or {**builtin_tools(shell), **web_tools(settings)}
    return TurnKit(
        tools=tools_in_use,
        hooks=load_hooks(settings.hooks_file) if settings.hooks_file else HooksConfig(),
        agents=default_definitions(settings.agents_dir, known_tools=tools_in_use),
        limits=LoopLimits.from_settings(settings),
        skills=load_skills(settings.skills_dir),
    )
