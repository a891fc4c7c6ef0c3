from pathlib import Path

from agentd.core import (
    agent_report_output,
    agent_result_output,
    agent_started_output,
    pre_tool_payload,
    prompt_hook_payload,
    stop_hook_payload,
    subagent_stop_payload,
)


def test_the_prompt_hook_payload_spells_the_documented_keys() -> None:
    assert prompt_hook_payload("s1", Path("/w"), "t1", "p1", "hi") == {
        "event": "user_prompt_submit",
        "sessionId": "s1",
        "cwd": "/w",
        "turnId": "t1",
        "promptId": "p1",
        "prompt": "hi",
    }


def test_the_pre_tool_payload_carries_the_call_input() -> None:
    assert pre_tool_payload("s1", Path("/w"), "bash", {"command": "ls"}) == {
        "event": "pre_tool",
        "sessionId": "s1",
        "cwd": "/w",
        "tool": "bash",
        "input": {"command": "ls"},
    }


def test_a_sub_agent_stop_payload_replaces_the_event_and_adds_its_task() -> None:
    extra = subagent_stop_payload("explorer", "agent-1", "t0", "call-1", 1)
    assert stop_hook_payload("s1", Path("/w"), "t0/agent-1", "done", 2, extra) == {
        "event": "subagent_stop",
        "sessionId": "s1",
        "cwd": "/w",
        "turnId": "t0/agent-1",
        "lastMessage": "done",
        "reentries": 2,
        "agent": "explorer",
        "taskId": "agent-1",
        "parentTurnId": "t0",
        "parentToolCallId": "call-1",
        "depth": 1,
    }
    assert stop_hook_payload("s1", Path("/w"), "t0", "", 0, {})["event"] == "stop"


def test_the_agent_task_outputs_leave_out_what_is_not_known() -> None:
    assert agent_started_output("agent-1", "explorer") == {
        "taskId": "agent-1",
        "agent": "explorer",
        "background": True,
    }
    assert agent_result_output("agent-1", "explorer", "completed", None) == {
        "taskId": "agent-1",
        "agent": "explorer",
        "status": "completed",
    }
    assert agent_result_output("agent-1", "x", "failed", "r")["reason"] == "r"
    assert agent_report_output("agent-1", "x", False, None) == {
        "taskId": "agent-1",
        "agent": "x",
        "done": False,
    }
    assert agent_report_output("agent-1", "x", True, "completed")["status"] == "completed"
