"""A hook that lives in a client (R-L2d): the server asks it with a request. One request
method for every event it registered for (stop, subagent_stop, user_prompt_submit); the
payload's `event` tells them apart."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from agentd.protocol import ClientRequest, outgoing
from agentd.tools import PROMPT_DECISIONS, HookDecision, HookVerdict, parse_verdict
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
        return await self._ask(payload, None)

    async def user_prompt_submit(self, payload: dict[str, Any]) -> HookVerdict:
        return await self._ask(payload, PROMPT_DECISIONS)

    async def _ask(self, payload: dict[str, Any], allowed: frozenset[HookDecision] | None) -> HookVerdict:
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
        return parse_verdict(answer, self.name, allowed)
