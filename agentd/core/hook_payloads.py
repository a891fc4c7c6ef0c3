"""What the loop sends its hooks (user_prompt_submit, pre_tool, stop, subagent_stop), with
its one encoding: hooks are client- or operator-written programs that read camelCase keys."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def prompt_hook_payload(
    session_id: str, cwd: Path, turn_id: str, prompt_id: str, prompt: str
) -> dict[str, Any]:
    return {
        "event": "user_prompt_submit",
        "sessionId": session_id,
        "cwd": str(cwd),
        "turnId": turn_id,
        "promptId": prompt_id,
        "prompt": prompt,
    }


def pre_tool_payload(session_id: str, cwd: Path, tool: str, tool_input: Any) -> dict[str, Any]:
    return {"event": "pre_tool", "sessionId": session_id, "cwd": str(cwd), "tool": tool, "input": tool_input}


def stop_hook_payload(
    session_id: str,
    cwd: Path,
    turn_id: str,
    last_message: str,
    reentries: int,
    extra: Mapping[str, Any],
) -> dict[str, Any]:
    """A stop hook's payload; `extra` (a sub-agent's `subagent_stop_payload`) overrides the event."""
    return {
        "event": "stop",
        "sessionId": session_id,
        "cwd": str(cwd),
        "turnId": turn_id,
        "lastMessage": last_message,
        "reentries": reentries,
        **extra,
    }


def subagent_stop_payload(
    agent: str, task_id: str, parent_turn_id: str, parent_tool_call_id: str, depth: int
) -> dict[str, Any]:
    """What a sub-agent's stop hooks get on top of the stop payload (its SubagentStop)."""
    return {
        "event": "subagent_stop",
        "agent": agent,
        "taskId": task_id,
        "parentTurnId": parent_turn_id,
        "parentToolCallId": parent_tool_call_id,
        "depth": depth,
    }
