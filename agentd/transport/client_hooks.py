"""A stop hook that lives in a client (R-L2d): the server asks it with a request."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from agentd.protocol import ClientRequest, outgoing
from agentd.tools import HookDecision, HookVerdict
from agentd.transport.state import Peer

STOP_HOOK_METHOD = ClientRequest.HOOKS_STOP


@dataclass
class ClientStopHook:
    connection: Peer
    timeout: float

    @property
    def connection_id(self) -> str:
        return self.connection.id

    @property
    def name(self) -> str:
        return f"client:{self.connection.id}"

    async def stop(self, payload: dict[str, Any]) -> HookVerdict:
        try:
            async with asyncio.timeout(self.timeout):
                call = outgoing.stop_hook(payload)
                answer = await self.connection.request(call.method, call.params)
        except TimeoutError:
            return HookVerdict(
                HookDecision.ALLOW, f"no answer within {self.timeout:g}s", hook=self.name, failed_open=True
            )
        except Exception as exc:  # gone, or answered with an error: fail open
            return HookVerdict(HookDecision.ALLOW, f"hook failed: {exc}", hook=self.name, failed_open=True)
        if not isinstance(answer, dict):
            return HookVerdict(
                HookDecision.ALLOW, "answer is not an object", hook=self.name, failed_open=True
            )
        raw = str(answer.get("decision", "allow")).lower()
        try:
            decision = HookDecision(raw)
        except ValueError:
            return HookVerdict(
                HookDecision.ALLOW, f"unknown decision {raw!r}", hook=self.name, failed_open=True
            )
        if decision is HookDecision.DENY:
            decision = HookDecision.BLOCK
        reason = answer.get("reason")
        context = answer.get("context")
        return HookVerdict(
            decision, str(reason) if reason else None, str(context) if context else None, hook=self.name
        )
