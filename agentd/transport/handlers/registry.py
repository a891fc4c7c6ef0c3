"""The method table the dispatcher serves: every name from `agentd/protocol/methods.py` → its params
model and handler."""

from __future__ import annotations

from agentd.protocol import (
    AttachParams,
    AuthenticateParams,
    EnqueueParams,
    ForkParams,
    GoalSetParams,
    HooksRegisterParams,
    InitializeParams,
    InterjectParams,
    ListSessionsParams,
    LoadSessionParams,
    NewSessionParams,
    PermissionRespondParams,
    PromptParams,
    QueueOp,
    RenameParams,
    RewindParams,
    Served,
    SessionIdParams,
    SessionParams,
    SetConfigOptionParams,
    SetModeParams,
    ShareParams,
    Unsupported,
)
from agentd.transport.handlers.clients import (
    hooks_register,
    permission_respond,
    session_attach,
    session_detach,
)
from agentd.transport.handlers.goals import (
    goal_clear,
    goal_get,
    goal_set,
    session_compact,
    session_rewind,
    usage_get,
)
from agentd.transport.handlers.lifecycle import (
    authenticate,
    initialize,
    session_close,
    session_delete,
    session_fork,
    session_list,
    session_load,
    session_new,
    session_resume,
)
from agentd.transport.handlers.prompt import (
    interject,
    prompt_enqueue,
    prompt_send_now,
    queue_method,
    session_cancel,
    session_prompt,
)
from agentd.transport.handlers.session_config import session_set_config_option, session_set_mode
from agentd.transport.handlers.session_info import session_rename
from agentd.transport.handlers.share import session_share
from agentd.transport.rpc import Method

# ACP methods of the pinned schema that agentd answers "not supported" (and does not
# advertise), with the reason the client is told.
UNSUPPORTED: dict[str, str] = {
    Unsupported.LOGOUT: "agentd authenticates each connection with a bearer token, not a login session "
    "(an operator revokes a token with `agentd token revoke`)",
}

METHODS: dict[str, Method] = {
    Served.ENQUEUE: Method(EnqueueParams, prompt_enqueue),
    Served.SEND_NOW: Method(EnqueueParams, prompt_send_now),
    **{op.method: queue_method(op.value) for op in QueueOp},
    Served.SESSION_RESUME: Method(LoadSessionParams, session_resume, needs_connection=True),
    Served.SESSION_CLOSE: Method(SessionIdParams, session_close),
    Served.SESSION_DELETE: Method(SessionIdParams, session_delete),
    Served.FORK: Method(ForkParams, session_fork),
    Served.SHARE: Method(ShareParams, session_share),
    Served.RENAME: Method(RenameParams, session_rename),
    Served.ATTACH: Method(AttachParams, session_attach, needs_connection=True),
    Served.DETACH: Method(SessionParams, session_detach, needs_connection=True),
    Served.GOAL_SET: Method(GoalSetParams, goal_set),
    Served.GOAL_GET: Method(SessionParams, goal_get),
    Served.GOAL_CLEAR: Method(SessionParams, goal_clear),
    Served.HOOKS_REGISTER: Method(HooksRegisterParams, hooks_register, needs_connection=True),
    Served.SESSION_SET_CONFIG_OPTION: Method(SetConfigOptionParams, session_set_config_option),
    Served.USAGE_GET: Method(SessionParams, usage_get),
    Served.COMPACT: Method(SessionParams, session_compact),
    Served.REWIND: Method(RewindParams, session_rewind),
    Served.INTERJECT: Method(InterjectParams, interject),
    Served.PERMISSION_RESPOND: Method(PermissionRespondParams, permission_respond),
    Served.INITIALIZE: Method(InitializeParams, initialize),
    Served.AUTHENTICATE: Method(AuthenticateParams, authenticate),
    Served.SESSION_NEW: Method(NewSessionParams, session_new),
    Served.SESSION_LOAD: Method(LoadSessionParams, session_load, needs_connection=True),
    Served.SESSION_LIST: Method(ListSessionsParams, session_list),
    Served.SESSION_PROMPT: Method(PromptParams, session_prompt),
    Served.SESSION_CANCEL: Method(SessionIdParams, session_cancel),
    Served.SESSION_SET_MODE: Method(SetModeParams, session_set_mode),
}
