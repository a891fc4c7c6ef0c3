"""What every session actor of a server shares: settings, the event writer, the provider
chain, the renderer, metrics, the store and the queued-byte ledger — built once by the
composition root (agentd/app.py) — and the turn machinery's parts (tools, hooks, agents,
loop limits, skills: a `TurnKit`, turn_kit.py), made by `make_kit` on first use: a server
that has created or loaded no session yet has not imported the loop or the tools."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentd.core import Lane, Provider
from agentd.infra import Metrics, Settings
from agentd.session.eventlog import EventWriter
from agentd.session.sinks import Renderer
from agentd.store import Store

if TYPE_CHECKING:
    from agentd.agents import AgentDefinition
    from agentd.core import Price
    from agentd.loop import LoopLimits
    from agentd.providers import ModelCatalogue
    from agentd.session.command_syntax import Skill
    from agentd.session.queue import QueuedBytes
    from agentd.session.replicas import LivePublisher
    from agentd.session.turn_kit import TurnKit
    from agentd.tools import HooksConfig, ShellLauncher, Tool


@dataclass
class ActorServices:
    settings: Settings
    writer: EventWriter
    provider: Provider
    render: Renderer  # the wire shape of events (agentd/transport/render.py, injected)
    make_kit: Callable[[], TurnKit]  # called once, at the first use of the parts below
    fallbacks: list[Lane] = field(default_factory=list)  # the provider chain after `provider`
    metrics: Metrics | None = None
    store: Store | None = None  # file snapshots and turn marks (R-T12); None: not kept
    shell: ShellLauncher | None = None  # how commands start (sandbox): stdio MCP servers too
    # Several replicas: transient events also go to the broker (agentd/session/replicas/live.py).
    live: LivePublisher | None = None
    # What the provider serves, for the model picker (agentd/providers/http/catalogue.py).
    models: ModelCatalogue | None = None
    # Made once, not per turn (`agent_tools`, `prices`): id(agent) → (agent, registry, its tools).
    _agent_tools: dict[int, tuple[AgentDefinition, dict[str, Tool], dict[str, Tool]]] = field(
        default_factory=dict, init=False, repr=False
    )
    _prices: tuple[object, dict[str, Price]] | None = field(default=None, init=False, repr=False)

    @functools.cached_property
    def queued_bytes(self) -> QueuedBytes:
        """Per principal, over all sessions. Made at the first session's queue: the queue's
        module (and what it imports) is not in an idle server (issue 32 item 3)."""
        from agentd.session.queue import QueuedBytes

        return QueuedBytes()

    @functools.cached_property
    def kit(self) -> TurnKit:
        return self.make_kit()

    @property
    def tools(self) -> dict[str, Tool]:
        return self.kit.tools

    @property
    def hooks(self) -> HooksConfig:
        return self.kit.hooks

    @property
    def agents(self) -> dict[str, AgentDefinition]:
        return self.kit.agents

    @property
    def limits(self) -> LoopLimits:
        return self.kit.limits

    @property
    def skills(self) -> dict[str, Skill]:
        return self.kit.skills

    def context_window_for(self, model: str) -> int:
        """The operator's per-model setting, else what the provider says, else the default:
        a session switched to another model compacts at that model's window."""
        if model in self.settings.context_windows:
            return self.settings.context_windows[model]
        known = self.models.context_window(model) if self.models is not None else None
        return known or self.settings.context_window

    def agent_tools(self, agent: AgentDefinition) -> dict[str, Tool]:
        """`agent.select_tools(self.tools)`, made once per agent (the registry does not
        change once made): a turn copies it, never changes it."""
        tools = self.kit.tools
        made = self._agent_tools.get(id(agent))
        if made is not None and made[0] is agent and made[1] is tools:
            return made[2]
        selected = agent.select_tools(tools)
        if len(self._agent_tools) >= 64:  # (a server has a few agents)
            self._agent_tools.clear()
        self._agent_tools[id(agent)] = (agent, tools, selected)
        return selected

    def prices(self) -> dict[str, Price]:
        """The operator's prices, made once per `settings.prices` (turns only read them)."""
        source = self.settings.prices
        made = self._prices
        if made is not None and made[0] is source:
            return made[1]
        from agentd.core import Price

        prices = {m: Price(p.input, p.output, p.cache_read, p.cache_write) for m, p in source.items()}
        self._prices = (source, prices)
        return prices
