"""What every session actor of a server shares: settings, the event writer, the provider
chain, tools, hooks, agents, loop limits, skills, metrics and the queued-byte ledger. Built
once by the composition root (server/app.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from server.agents import DEFAULT_AGENT, AgentDefinition
from server.config import Settings
from server.core.lane import Lane
from server.core.provider import Provider
from server.loop.budget import BudgetLimits
from server.loop.limits import LoopLimits
from server.loop.usage import Price
from server.metrics import Metrics
from server.session.eventlog import EventWriter
from server.session.local_commands import Skill
from server.session.queue_sync import QueuedBytes
from server.session.sinks import Renderer
from server.store.db import Store
from server.tools.base import Tool
from server.tools.hooks import HooksConfig


@dataclass
class ActorServices:
    settings: Settings
    writer: EventWriter
    provider: Provider
    tools: dict[str, Tool]
    render: Renderer  # the wire shape of events (server/transport/render.py, injected)
    hooks: HooksConfig = field(default_factory=HooksConfig)
    fallbacks: list[Lane] = field(default_factory=list)  # the provider chain after `provider`
    agents: dict[str, AgentDefinition] = field(default_factory=lambda: {DEFAULT_AGENT.name: DEFAULT_AGENT})

    limits: LoopLimits = field(default_factory=LoopLimits)  # every loop constant in force
    skills: dict[str, Skill] = field(default_factory=dict)
    metrics: Metrics | None = None
    queued_bytes: QueuedBytes = field(default_factory=QueuedBytes)  # per principal, all sessions
    store: Store | None = None  # file snapshots and turn marks (R-T12); None: not kept

    def budget_limits(self) -> BudgetLimits:
        return self.limits.budget

    def prices(self) -> dict[str, Price]:
        return {
            m: Price(p.input, p.output, p.cache_read, p.cache_write) for m, p in self.settings.prices.items()
        }
