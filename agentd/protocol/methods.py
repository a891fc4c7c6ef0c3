"""Every JSON-RPC method name agentd serves or sends — the one place they are spelled.

StrEnums: a member *is* its wire string (`Served.SESSION_NEW == "session/new"`), so it can key
a dispatch table, be compared with an incoming `method`, and be serialised unchanged.
"""

from __future__ import annotations

from enum import StrEnum


class Served(StrEnum):
    """Requests and notifications a client sends and agentd answers (client → agentd)."""

    # ACP (protocol version 1)
    INITIALIZE = "initialize"
    AUTHENTICATE = "authenticate"
    SESSION_NEW = "session/new"
    SESSION_LOAD = "session/load"
    SESSION_LIST = "session/list"
    SESSION_PROMPT = "session/prompt"
    SESSION_CANCEL = "session/cancel"
    SESSION_SET_MODE = "session/set_mode"
    SESSION_SET_CONFIG_OPTION = "session/set_config_option"
    SESSION_RESUME = "session/resume"
    SESSION_CLOSE = "session/close"
    SESSION_DELETE = "session/delete"
    # agentd's `_agentd/` extensions (R-P3)
    ATTACH = "_agentd/session/attach"
    DETACH = "_agentd/session/detach"
    FORK = "_agentd/session/fork"
    SHARE = "_agentd/session/share"
    RENAME = "_agentd/session/rename"
    COMPACT = "_agentd/session/compact"
    REWIND = "_agentd/session/rewind"
    EXPORT = "_agentd/session/export"
    IMPORT = "_agentd/session/import"
    CHANGES = "_agentd/session/changes"
    REVERT_FILE = "_agentd/session/revert_file"
    ENQUEUE = "_agentd/prompt/enqueue"
    SEND_NOW = "_agentd/prompt/send_now"
    INTERJECT = "_agentd/interject"
    USAGE_GET = "_agentd/usage/get"
    MODELS_LIST = "_agentd/models/list"
    GOAL_SET = "_agentd/goal/set"
    GOAL_GET = "_agentd/goal/get"
    GOAL_CLEAR = "_agentd/goal/clear"
    HOOKS_REGISTER = "_agentd/hooks/register"
    PERMISSION_RESPOND = "_agentd/permission/respond"


class Unsupported(StrEnum):
    """ACP methods of the pinned schema agentd answers "not supported" (and does not advertise)."""

    LOGOUT = "logout"


class QueueOp(StrEnum):
    """The `_agentd/queue/<op>` family: one served method per queue operation."""

    LIST = "list"
    REMOVE = "remove"
    EDIT = "edit"
    MOVE = "move"
    COMBINE = "combine"
    HOLD = "hold"
    RELEASE = "release"
    CLEAR = "clear"
    INTERJECT = "interject"

    @property
    def method(self) -> str:
        return f"{QUEUE_PREFIX}{self.value}"


QUEUE_PREFIX = "_agentd/queue/"


class ClientRequest(StrEnum):
    """Requests agentd sends to a client and awaits an answer for (agentd → client)."""

    REQUEST_PERMISSION = "session/request_permission"
    FS_READ_TEXT_FILE = "fs/read_text_file"
    FS_WRITE_TEXT_FILE = "fs/write_text_file"
    TERMINAL_CREATE = "terminal/create"
    TERMINAL_OUTPUT = "terminal/output"
    TERMINAL_WAIT_FOR_EXIT = "terminal/wait_for_exit"
    TERMINAL_KILL = "terminal/kill"
    TERMINAL_RELEASE = "terminal/release"
    HOOKS_STOP = "_agentd/hooks/stop"  # a stop hook registered by the client (R-L2d)


class Notification(StrEnum):
    """Notifications agentd sends (agentd → client)."""

    SESSION_UPDATE = "session/update"
    EVENT = "_agentd/event"
    PERMISSION_RESOLVED = "_agentd/permission/resolved"
    SESSION_SNAPSHOT = "_agentd/session/snapshot"
    RESYNC_REQUIRED = "_agentd/resync_required"
    TOKEN_REVOKED = "_agentd/token_revoked"  # SSE only: the last frame of a revoked token's stream


# Both directions (LSP's convention, which ACP adopts): abandon a request by its id.
CANCEL_REQUEST = "$/cancel_request"
# agentd's own methods and notifications (R-P3): a stock ACP client is sent none of them.
AGENTD_PREFIX = "_agentd/"


def served_methods() -> list[str]:
    """Every method name agentd answers, queue operations included."""
    return [*(str(m) for m in Served), *(op.method for op in QueueOp)]


# What `initialize` advertises in `_meta.agentd.extensions`: every `_agentd/` method a client
# may call or will receive (order is part of the documented answer).
EXTENSIONS: tuple[str, ...] = tuple(
    str(method)
    for method in (
        Served.ATTACH,
        Served.FORK,
        Served.ENQUEUE,
        Served.SEND_NOW,
        *(op.method for op in QueueOp),
        Served.DETACH,
        Notification.SESSION_SNAPSHOT,
        Notification.RESYNC_REQUIRED,
        Served.INTERJECT,
        Served.COMPACT,
        Served.REWIND,
        Served.USAGE_GET,
        Served.MODELS_LIST,
        Served.GOAL_SET,
        Served.GOAL_GET,
        Served.GOAL_CLEAR,
        Served.HOOKS_REGISTER,
        Notification.EVENT,
        Notification.PERMISSION_RESOLVED,
        Served.PERMISSION_RESPOND,
        Served.SHARE,
        Served.RENAME,
        Served.EXPORT,
        Served.IMPORT,
        Served.CHANGES,
        Served.REVERT_FILE,
    )
)
