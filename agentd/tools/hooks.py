"""Hooks: outside programs that may veto a tool call (pre-tool), keep a turn going (stop), or
add context to a prompt or refuse it (user_prompt_submit).

A command hook receives one JSON object on stdin and answers with one JSON object on
stdout. A hook that crashes, times out or prints nonsense *fails open* — the call runs,
the turn may stop — and the verdict says so, so a broken hook never wedges a session.

Config file (TOML, `AGENTD_HOOKS_FILE`):

    [[pre_tool]]
    command = "python3 /etc/agentd/no_rm.py"
    tools = ["bash"]          # optional: only these tools
    timeout = 10              # seconds, default 10

    [[stop]]
    command = "./check_tests.sh"

    [[subagent_stop]]         # asked when a sub-agent (R-T11) is about to stop
    command = "./check_child.sh"

    [[user_prompt_submit]]    # asked when a user's prompt starts a turn, before any sampling
    command = "./prompt_policy.sh"

pre-tool stdin:  {"event": "pre_tool", "sessionId", "cwd", "tool", "input"}
pre-tool stdout: {"decision": "allow" | "deny", "reason": "..."}
stop stdin:      {"event": "stop", "sessionId", "cwd", "turnId", "lastMessage", "reentries"}
stop stdout:     {"decision": "allow" | "block" | "prevent", "reason": "...", "context": "..."}
subagent_stop stdin: the stop payload with "event": "subagent_stop", plus "agent", "taskId",
                 "parentTurnId", "parentToolCallId", "depth"; it answers like a stop hook
                 (block: the child keeps working; its own ≤ 8 re-entries).
user_prompt_submit stdin:  {"event": "user_prompt_submit", "sessionId", "cwd", "turnId",
                            "promptId", "prompt"}
user_prompt_submit stdout: {"decision": "allow" | "block", "reason": "...", "context": "..."}
                 (context: added for the model as a system reminder after the prompt; block:
                 the prompt is taken out of the conversation and the turn ends unsampled,
                 the reason shown to the user)
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from agentd.tools.shell import kill_all_now, new_tag, tagged_env

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 10.0
MAX_OUTPUT_BYTES = 64 * 1024


class HookDecision(StrEnum):
    ALLOW = "allow"
    DENY = "deny"  # pre-tool: skip this one call
    BLOCK = "block"  # stop: keep working, with the reason as feedback
    PREVENT = "prevent"  # stop: end the turn and do not continue (overrides block)


@dataclass(frozen=True)
class HookVerdict:
    decision: HookDecision
    reason: str | None = None
    context: str | None = None  # extra text for the model (stop hooks)
    hook: str = ""
    failed_open: bool = False  # the hook errored or timed out and was ignored

    def to_event(self) -> dict[str, Any]:
        data: dict[str, Any] = {"hook": self.hook, "decision": self.decision.value}
        if self.reason:
            data["reason"] = self.reason
        if self.failed_open:
            data["failedOpen"] = True
        return data


class PreToolHook(Protocol):
    name: str

    def applies_to(self, tool: str) -> bool: ...

    async def pre_tool(self, payload: dict[str, Any]) -> HookVerdict: ...


class StopHook(Protocol):
    name: str

    async def stop(self, payload: dict[str, Any]) -> HookVerdict: ...


class PromptHook(Protocol):
    name: str

    async def user_prompt_submit(self, payload: dict[str, Any]) -> HookVerdict: ...


@dataclass(frozen=True)
class StopHookLimits:
    max_reentries: int = 8  # stop-hook re-entries per turn (R-L2d); then the turn may end


class HookConfigError(ValueError):
    pass


@dataclass(frozen=True)
class CommandHook:
    command: str
    tools: frozenset[str] | None = None
    timeout: float = DEFAULT_TIMEOUT_S
    cwd: Path | None = None

    @property
    def name(self) -> str:
        return self.command

    def applies_to(self, tool: str) -> bool:
        return self.tools is None or tool in self.tools

    async def run(self, payload: dict[str, Any]) -> dict[str, Any] | str:
        """The hook's JSON answer, or a string saying why it failed."""
        tag = new_tag()  # finds children that leave the process group (setsid)
        try:
            proc = await asyncio.create_subprocess_shell(
                self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=str(self.cwd or payload.get("cwd") or "."),
                env=tagged_env(tag),
                start_new_session=True,
            )
        except OSError as exc:
            return f"could not start: {exc}"
        try:
            async with asyncio.timeout(self.timeout):
                out, err = await proc.communicate(json.dumps(payload).encode())
        except TimeoutError:
            kill_all_now(proc.pid, tag, root_alive=proc.returncode is None)
            await proc.wait()
            return f"timed out after {self.timeout:g}s"
        except asyncio.CancelledError:
            kill_all_now(proc.pid, tag, root_alive=proc.returncode is None)
            raise
        if proc.returncode != 0:
            tail = err.decode(errors="replace").strip()[-500:]
            return f"exited with status {proc.returncode}" + (f": {tail}" if tail else "")
        try:
            answer = json.loads(out[:MAX_OUTPUT_BYTES] or b"{}")
        except json.JSONDecodeError:
            return "printed something that is not JSON"
        if not isinstance(answer, dict):
            return "printed JSON that is not an object"
        return answer

    async def pre_tool(self, payload: dict[str, Any]) -> HookVerdict:
        answer = await self.run(payload)
        if isinstance(answer, str):
            log.warning("pre-tool hook %r failed open: %s", self.command, answer)
            return HookVerdict(HookDecision.ALLOW, answer, hook=self.name, failed_open=True)
        decision = str(answer.get("decision", "allow")).lower()
        reason = answer.get("reason")
        if decision == HookDecision.DENY:
            return HookVerdict(HookDecision.DENY, str(reason or "denied by hook"), hook=self.name)
        if decision != HookDecision.ALLOW:
            return HookVerdict(
                HookDecision.ALLOW, f"unknown decision {decision!r}", hook=self.name, failed_open=True
            )
        return HookVerdict(HookDecision.ALLOW, hook=self.name)

    async def stop(self, payload: dict[str, Any]) -> HookVerdict:
        answer = await self.run(payload)
        if isinstance(answer, str):
            log.warning("stop hook %r failed open: %s", self.command, answer)
            return HookVerdict(HookDecision.ALLOW, answer, hook=self.name, failed_open=True)
        return parse_verdict(answer, self.name)

    async def user_prompt_submit(self, payload: dict[str, Any]) -> HookVerdict:
        answer = await self.run(payload)
        if isinstance(answer, str):
            log.warning("user_prompt_submit hook %r failed open: %s", self.command, answer)
            return HookVerdict(HookDecision.ALLOW, answer, hook=self.name, failed_open=True)
        return parse_verdict(answer, self.name, PROMPT_DECISIONS)


# A prompt hook allows (maybe adding context) or blocks; "deny" reads as block.
PROMPT_DECISIONS = frozenset({HookDecision.ALLOW, HookDecision.BLOCK})


def parse_verdict(
    answer: dict[str, Any], hook: str, allowed: frozenset[HookDecision] | None = None
) -> HookVerdict:
    """A stop or prompt hook's JSON answer as a verdict; a decision it may not give fails open."""
    decision = str(answer.get("decision", "allow")).lower()
    reason = answer.get("reason")
    context = answer.get("context")
    try:
        parsed = HookDecision(decision)
    except ValueError:
        parsed = None
    if parsed is HookDecision.DENY:
        parsed = HookDecision.BLOCK
    if parsed is None or (allowed is not None and parsed not in allowed):
        return HookVerdict(HookDecision.ALLOW, f"unknown decision {decision!r}", hook=hook, failed_open=True)
    return HookVerdict(parsed, str(reason) if reason else None, str(context) if context else None, hook=hook)


@dataclass(frozen=True)
class HooksConfig:
    pre_tool: list[CommandHook] = field(default_factory=list)
    stop: list[CommandHook] = field(default_factory=list)
    subagent_stop: list[CommandHook] = field(default_factory=list)  # SubagentStop (R-T11)
    user_prompt_submit: list[CommandHook] = field(default_factory=list)  # at a prompt's turn start


def load_hooks(path: Path) -> HooksConfig:
    import tomllib  # only with a hooks file (issue 32 item 3)

    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise HookConfigError(f"hooks file {path}: {exc}") from exc

    def parse(kind: str) -> list[CommandHook]:
        hooks = []
        for i, entry in enumerate(data.get(kind, [])):
            where = f"hooks file {path}: [[{kind}]] #{i + 1}"
            if (
                not isinstance(entry, dict)
                or not isinstance(entry.get("command"), str)
                or not entry["command"]
            ):
                raise HookConfigError(f"{where}: needs a non-empty `command` string")
            tools = entry.get("tools")
            if tools is not None and (
                not isinstance(tools, list) or not all(isinstance(t, str) for t in tools)
            ):
                raise HookConfigError(f"{where}: `tools` must be a list of tool names")
            timeout = entry.get("timeout", DEFAULT_TIMEOUT_S)
            if not isinstance(timeout, (int, float)) or timeout <= 0:
                raise HookConfigError(f"{where}: `timeout` must be a positive number of seconds")
            hooks.append(CommandHook(entry["command"], frozenset(tools) if tools else None, float(timeout)))
        return hooks

    sections = ("pre_tool", "stop", "subagent_stop", "user_prompt_submit")
    unknown = set(data) - set(sections)
    if unknown:
        raise HookConfigError(
            f"hooks file {path}: unknown sections {sorted(unknown)} (use {', '.join(sections)})"
        )
    return HooksConfig(*(parse(kind) for kind in sections))
