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
from agentd.session.queue import QueuedBytes
from agentd.session.sinks import Renderer
from agentd.store import Store

if TYPE_CHECKING:
    from agentd.agents import AgentDefinition
    from agentd.core import Price
    from agentd.loop import LoopLimits
    from agentd.providers import ModelCatalogue
    from agentd.session.command_syntax import Skill
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
    queued_bytes: QueuedBytes = field(default_factory=QueuedBytes)  # per principal, all sessions
    store: Store | None = None  # file snapshots and turn marks (R-T12); None: not kept
    shell: ShellLauncher | None = None  # how commands start (sandbox): stdio MCP servers too
    # Several replicas: transient events also go to the broker (agentd/session/replicas/live.py).
    live: LivePublisher | None = None
    # What the provider serves, for the model picker (agentd/providers/http/catalogue.py).
    models: ModelCatalogue | None = None

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

    def prices(self) -> dict[str, Price]:
        from agentd.core import Price

        return {
            m: Price(p.input, p.output, p.cache_read, p.cache_write) for m, p in self.settings.prices.items()
        }
