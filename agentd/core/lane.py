"""A provider lane: one provider + model the loop may rotate to (R-R3); built by the provider
factory, used by the loop."""

from __future__ import annotations

from dataclasses import dataclass

from agentd.core.provider import Provider


@dataclass(frozen=True)
class Lane:
    provider: Provider
    model: str
    name: str
