"""agentd/protocol/outgoing.py: what each builder puts on the wire, and that ACP's own methods
validate against the pinned ACP schema as agent→client frames."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.protocol import outgoing
from agentd.protocol.jsonrpc import notification, request
from agentd.protocol.methods import ClientRequest, Notification
from agentd.protocol.outgoing import Outgoing
from tests.support.acp_schema import AcpValidator

TOOL_CALL = {"toolCallId": "call_1", "title": "Write a.txt", "kind": "edit", "status": "pending"}
OPTIONS = [
    {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
]

CASES: list[tuple[str, Outgoing, str, dict[str, Any]]] = [
    (
        "request_permission",
        outgoing.request_permission("sess_1", TOOL_CALL, OPTIONS, "perm_1"),
        "session/request_permission",
        {
            "sessionId": "sess_1",
            "toolCall": TOOL_CALL,
            "options": OPTIONS,
            "_meta": {"agentd": {"requestId": "perm_1"}},
        },
    ),
    (
        "read_text_file",
        outgoing.read_text_file("sess_1", "/w/a.txt"),
        "fs/read_text_file",
        {"sessionId": "sess_1", "path": "/w/a.txt"},
    ),
    (
        "write_text_file",
        outgoing.write_text_file("sess_1", "/w/a.txt", "hi\n"),
        "fs/write_text_file",
        {"sessionId": "sess_1", "path": "/w/a.txt", "content": "hi\n"},
    ),
    (
        "create_terminal",
        outgoing.create_terminal("sess_1", "/bin/bash", ["-c", "ls"], "/w", 4096),
        "terminal/create",
        {
            "sessionId": "sess_1",
            "command": "/bin/bash",
            "args": ["-c", "ls"],
            "cwd": "/w",
            "outputByteLimit": 4096,
        },
    ),
    *(
        (
            str(method),
            outgoing.terminal_call(method, "sess_1", "term_1"),
            str(method),
            {"sessionId": "sess_1", "terminalId": "term_1"},
        )
        for method in sorted(outgoing.TERMINAL_CALLS)
    ),
    (
        "stop_hook",
        outgoing.stop_hook({"sessionId": "sess_1", "turnId": "t1"}),
        "_agentd/hooks/stop",
        {"sessionId": "sess_1", "turnId": "t1"},
    ),
    (
        "resync_required",
        outgoing.resync_required("sess_1", 7, "client_too_slow"),
        "_agentd/resync_required",
        {"sessionId": "sess_1", "lastSeq": 7, "reason": "client_too_slow"},
    ),
    (
        "token_revoked",
        outgoing.token_revoked("token revoked"),
        "_agentd/token_revoked",
        {"reason": "token revoked"},
    ),
    (
        "agentd_event",
        outgoing.agentd_event("sess_1", "turn_ended", {"turnId": "t1"}, {"agentd": {"seq": 3}}),
        "_agentd/event",
        {
            "sessionId": "sess_1",
            "kind": "turn_ended",
            "event": {"turnId": "t1"},
            "_meta": {"agentd": {"seq": 3}},
        },
    ),
    (
        "session_update",
        outgoing.session_update(
            "sess_1",
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}},
            None,
        ),
        "session/update",
        {
            "sessionId": "sess_1",
            "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}},
        },
    ),
    (
        "session_update_meta",
        outgoing.session_update(
            "sess_1",
            {"sessionUpdate": "current_mode_update", "currentModeId": "plan"},
            {"agentd": {"seq": 1}},
        ),
        "session/update",
        {
            "sessionId": "sess_1",
            "update": {"sessionUpdate": "current_mode_update", "currentModeId": "plan"},
            "_meta": {"agentd": {"seq": 1}},
        },
    ),
]


@pytest.mark.parametrize(("built", "method", "params"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_builder_output(built: Outgoing, method: str, params: dict[str, Any]) -> None:
    assert built.method == method
    assert built.params == params
    assert list(built.params) == list(params)  # key order too: frames are compared as text


@pytest.mark.parametrize("built", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_builder_frames_validate_against_the_pinned_schema(built: Outgoing) -> None:
    if isinstance(built.method, ClientRequest):
        frame = request("agentd-1", built.method, built.params)
    else:
        assert isinstance(built.method, Notification)
        frame = notification(built.method, built.params)
    AcpValidator.default().assert_valid_agent_frame(frame, {})


def test_an_invalid_frame_is_caught() -> None:
    # The schema check above can fail: a read without its path is refused.
    frame = request("agentd-1", ClientRequest.FS_READ_TEXT_FILE, {"sessionId": "s"})
    with pytest.raises(AssertionError):
        AcpValidator.default().assert_valid_agent_frame(frame, {})


@pytest.mark.parametrize(
    "method",
    [ClientRequest.TERMINAL_CREATE, ClientRequest.FS_READ_TEXT_FILE, ClientRequest.REQUEST_PERMISSION],
)
def test_terminal_call_refuses_other_methods(method: ClientRequest) -> None:
    with pytest.raises(ValueError, match="not a call on an existing terminal"):
        outgoing.terminal_call(method, "s", "t")
