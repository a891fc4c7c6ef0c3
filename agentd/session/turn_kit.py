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
from agentd.infra import Settings
from agentd.loop import TASK_TOOL, BudgetLimits, GoalLimits, LoopLimits
from agentd.session.command_syntax import Skill, load_skills
from agentd.tools import HooksConfig, ShellLauncher, Tool, builtin_tools, load_hooks


@dataclass
class TurnKit:
    tools: dict[str, Tool]
    hooks: HooksConfig = field(default_factory=HooksConfig)
    agents: dict[str, AgentDefinition] = field(default_factory=lambda: {DEFAULT_AGENT.name: DEFAULT_AGENT})
    limits: LoopLimits = field(default_factory=LoopLimits)  # every loop constant in force
    skills: dict[str, Skill] = field(default_factory=dict)


def loop_limits(settings: Settings) -> LoopLimits:
    """The seed defaults, the budget and goal settings, then `AGENTD_LIMITS` overrides."""
    base = LoopLimits(
        budget=BudgetLimits(
            max_iterations=settings.max_iterations,
            idle_progress_s=settings.idle_progress_s,
            activity_timeout_s=settings.activity_timeout_s,
            token_budget=settings.token_budget,
        ),
        goal=GoalLimits(attempt_timeout_s=settings.goal_attempt_timeout_s),
    )
    return base.with_overrides(settings.limits)


def build_kit(
    settings: Settings, shell: ShellLauncher | None, tools: dict[str, Tool] | None = None
) -> TurnKit:
    """`tools` replace the built-in set (embedding, tests); `shell`: how `bash` starts commands."""
    tools_in_use = tools or builtin_tools(shell)
    return TurnKit(
        tools=tools_in_use,
        hooks=load_hooks(settings.hooks_file) if settings.hooks_file else HooksConfig(),
        agents=default_definitions(settings.agents_dir, known_tools=[*tools_in_use, TASK_TOOL]),
        limits=loop_limits(settings),
        skills=load_skills(settings.skills_dir),
    )
