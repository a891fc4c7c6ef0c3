"""agentd/protocol/methods.py: every method name is spelled once, served or sent somewhere, and (for
ACP's own methods) known to the pinned schema on the right side."""

from __future__ import annotations

import pytest

from agentd.protocol import outgoing
from agentd.protocol.methods import (
    CANCEL_REQUEST,
    EXTENSIONS,
    ClientRequest,
    Notification,
    QueueOp,
    Served,
    Unsupported,
    served_methods,
)
from agentd.transport.handlers import METHODS, UNSUPPORTED
from tests.support.acp_schema import AcpValidator

# The wire strings are the contract: a renamed member must not change what goes on the wire.
WIRE = [
    (Served.INITIALIZE, "initialize"),
    (Served.AUTHENTICATE, "authenticate"),
    (Served.SESSION_NEW, "session/new"),
    (Served.SESSION_LOAD, "session/load"),
    (Served.SESSION_LIST, "session/list"),
    (Served.SESSION_PROMPT, "session/prompt"),
    (Served.SESSION_CANCEL, "session/cancel"),
    (Served.SESSION_SET_MODE, "session/set_mode"),
    (Served.SESSION_SET_CONFIG_OPTION, "session/set_config_option"),
    (Served.SESSION_RESUME, "session/resume"),
    (Served.SESSION_CLOSE, "session/close"),
    (Served.SESSION_DELETE, "session/delete"),
    (Served.ATTACH, "_agentd/session/attach"),
    (Served.DETACH, "_agentd/session/detach"),
    (Served.FORK, "_agentd/session/fork"),
    (Served.SHARE, "_agentd/session/share"),
    (Served.RENAME, "_agentd/session/rename"),
    (Served.COMPACT, "_agentd/session/compact"),
    (Served.REWIND, "_agentd/session/rewind"),
    (Served.EXPORT, "_agentd/session/export"),
    (Served.IMPORT, "_agentd/session/import"),
    (Served.CHANGES, "_agentd/session/changes"),
    (Served.REVERT_FILE, "_agentd/session/revert_file"),
    (Served.ENQUEUE, "_agentd/prompt/enqueue"),
    (Served.SEND_NOW, "_agentd/prompt/send_now"),
    (Served.INTERJECT, "_agentd/interject"),
    (Served.USAGE_GET, "_agentd/usage/get"),
    (Served.MODELS_LIST, "_agentd/models/list"),
    (Served.GOAL_SET, "_agentd/goal/set"),
    (Served.GOAL_GET, "_agentd/goal/get"),
    (Served.GOAL_CLEAR, "_agentd/goal/clear"),
    (Served.HOOKS_REGISTER, "_agentd/hooks/register"),
    (Served.PERMISSION_RESPOND, "_agentd/permission/respond"),
    (Unsupported.LOGOUT, "logout"),
    (ClientRequest.REQUEST_PERMISSION, "session/request_permission"),
    (ClientRequest.FS_READ_TEXT_FILE, "fs/read_text_file"),
    (ClientRequest.FS_WRITE_TEXT_FILE, "fs/write_text_file"),
    (ClientRequest.TERMINAL_CREATE, "terminal/create"),
    (ClientRequest.TERMINAL_OUTPUT, "terminal/output"),
    (ClientRequest.TERMINAL_WAIT_FOR_EXIT, "terminal/wait_for_exit"),
    (ClientRequest.TERMINAL_KILL, "terminal/kill"),
    (ClientRequest.TERMINAL_RELEASE, "terminal/release"),
    (ClientRequest.HOOKS_STOP, "_agentd/hooks/stop"),
    (Notification.SESSION_UPDATE, "session/update"),
    (Notification.EVENT, "_agentd/event"),
    (Notification.PERMISSION_RESOLVED, "_agentd/permission/resolved"),
    (Notification.SESSION_SNAPSHOT, "_agentd/session/snapshot"),
    (Notification.RESYNC_REQUIRED, "_agentd/resync_required"),
    (Notification.TOKEN_REVOKED, "_agentd/token_revoked"),
]


@pytest.mark.parametrize(("member", "wire"), WIRE, ids=[w for _, w in WIRE])
def test_wire_string(member: str, wire: str) -> None:
    assert member == wire
    assert str(member) == wire and f"{member}" == wire


def test_every_member_has_a_pinned_wire_string() -> None:
    pinned = {m for m, _ in WIRE}
    every = {*Served, *Unsupported, *ClientRequest, *Notification}
    assert every == pinned


@pytest.mark.parametrize("op", list(QueueOp), ids=[op.value for op in QueueOp])
def test_queue_op_method(op: QueueOp) -> None:
    assert op.method == f"_agentd/queue/{op.value}"
    assert op.method in METHODS


def test_cancel_request_name() -> None:
    assert CANCEL_REQUEST == "$/cancel_request"


def test_the_method_table_serves_exactly_the_served_methods() -> None:
    assert sorted(METHODS) == sorted(served_methods())
    assert set(UNSUPPORTED) == set(Unsupported)
    assert not set(UNSUPPORTED) & set(METHODS)


@pytest.mark.parametrize("name", EXTENSIONS)
def test_every_advertised_extension_is_served_or_sent(name: str) -> None:
    assert name.startswith("_agentd/")
    assert name in METHODS or name in set(Notification)
    assert type(name) is str  # plain strings in the initialize answer


def test_every_client_request_has_a_builder() -> None:
    built = {
        outgoing.request_permission("s", {"toolCallId": "t"}, [], "p").method,
        outgoing.read_text_file("s", "/w/a").method,
        outgoing.write_text_file("s", "/w/a", "x").method,
        outgoing.create_terminal("s", "/bin/bash", [], "/w", 1).method,
        outgoing.stop_hook({}).method,
        *(outgoing.terminal_call(m, "s", "t").method for m in outgoing.TERMINAL_CALLS),
    }
    assert built == set(ClientRequest)


# session/cancel is ACP's one client→agent notification; the rest of ACP's served methods are requests.
ACP_SIDES: list[tuple[str, str, str]] = [
    (m, "agent", "Request") for m in Served if not m.startswith("_") and m != Served.SESSION_CANCEL
]
ACP_SIDES += [(m, "agent", "Request") for m in Unsupported]
ACP_SIDES += [(m, "client", "Request") for m in ClientRequest if not m.startswith("_")]
ACP_SIDES += [(Notification.SESSION_UPDATE, "client", "Notification")]
ACP_SIDES += [(Served.SESSION_CANCEL, "agent", "Notification")]


@pytest.mark.parametrize(("method", "side", "kind"), ACP_SIDES, ids=[f"{m}-{k}" for m, _, k in ACP_SIDES])
def test_acp_methods_are_in_the_pinned_schema_on_the_right_side(method: str, side: str, kind: str) -> None:
    validator = AcpValidator.default()
    found = validator._by_method.get((method, side, kind))
    assert found is not None, f"{method} is not a {side}-handled {kind} in the pinned schema"
